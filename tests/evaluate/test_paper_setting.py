"""`cselab train --paper-setting`: the papers' model, corpus and data, checked (and, with network,
fetched) before any work; and `cselab data download wiki1m`. No network: the Hub is offline or
cached, and downloads use file:// URLs or a closed local port."""
from __future__ import annotations

import hashlib
import json
import shlex
import tarfile
from pathlib import Path

import pytest
from huggingface_hub import constants

from cselab import cli
from cselab.config import load_config
from cselab.evaluate import download
from tests.evaluate.doc_commands import DOCS, doc_commands


def cache_fake_model(hub_cache: Path, name: str = "bert-base-uncased") -> None:
    """The Hugging Face cache layout of a downloaded model: refs/main -> snapshots/<commit>/files."""
    repo = hub_cache / f"models--{name}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"weights")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def train_error(argv: list[str], capsys) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_offline_start_names_every_missing_piece_and_writes_nothing(offline_home, capsys):
    before = files_under(offline_home)
    err = train_error(["train", "--recipe", "simcse", "--paper-setting"], capsys)
    assert err.count("\n") == 1 and err.startswith("cselab train: error: --paper-setting: missing")
    assert "model bert-base-uncased" in err and "`huggingface-cli download bert-base-uncased`" in err
    assert f"corpus {offline_home}/.cache/cselab/wiki1m_for_simcse.txt" in err
    assert "`cselab data download wiki1m`" in err
    assert f"SentEval data in {offline_home}/.cache/cselab/senteval" in err and "`cselab data download`" in err
    assert files_under(offline_home) == before  # no output dir, no cache, no partial file


def test_only_what_is_missing_is_named(offline_home, senteval_dir, monkeypatch, capsys):
    cache_fake_model(offline_home / "hf-hub")
    monkeypatch.setenv("CSELAB_DATA", str(senteval_dir))
    err = train_error(["train", "--recipe", "una", "--paper-setting"], capsys)
    assert "wiki1m" in err
    assert "bert-base-uncased" not in err and "SentEval" not in err


def test_print_config_shows_the_paper_setting(offline_home, senteval_dir, monkeypatch, capsys):
    cache_fake_model(offline_home / "hf-hub")
    corpus = offline_home / "corpora" / "wiki.txt"
    corpus.parent.mkdir()
    corpus.write_text("one sentence\nanother sentence\n")
    monkeypatch.setenv("CSELAB_WIKI1M", str(corpus))
    monkeypatch.setenv("CSELAB_DATA", str(senteval_dir))
    assert cli.main(["train", "--recipe", "simcse", "--paper-setting", "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["model"]["name_or_path"] == "bert-base-uncased"
    assert config["data"]["corpus"] == str(corpus)
    assert config["data"]["max_sentences"] is None
    assert config["data"]["dev_dir"] == str(senteval_dir)
    assert config["objective"][0]["temperature"] == 0.05  # the recipe itself is unchanged


def test_user_overrides_sit_on_top_and_are_checked(offline_home, senteval_dir, monkeypatch, capsys, tmp_path):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text("a sentence\n")
    monkeypatch.setenv("CSELAB_DATA", str(senteval_dir))
    model_dir = tmp_path / "tiny-model"
    model_dir.mkdir()
    argv = ["train", "--paper-setting", "--corpus", str(corpus), "--set", f"model.name_or_path={model_dir}",
            "--print-config"]
    err = train_error(argv, capsys)
    assert f"model {model_dir} (an empty folder; a model directory holds config.json" in err and "corpus" not in err
    (model_dir / "config.json").write_text("{}")
    assert cli.main(argv) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["model"]["name_or_path"] == str(model_dir) and config["data"]["corpus"] == str(corpus)


def test_custom_locations_get_download_commands_with_dest(offline_home, capsys, tmp_path):
    cache_fake_model(offline_home / "hf-hub")
    err = train_error(["train", "--paper-setting", "--corpus", str(tmp_path / "c.txt"),
                       "--set", f"data.dev_dir={tmp_path / 'sent'}"], capsys)
    assert f"`cselab data download wiki1m --dest {tmp_path / 'c.txt'}`" in err
    assert f"`cselab data download --dest {tmp_path / 'sent'}`" in err


@pytest.fixture
def networked_home(offline_home, monkeypatch) -> Path:
    """The empty home with the Hub not set offline (the model is cached, so nothing asks the Hub)."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    cache_fake_model(offline_home / "hf-hub")
    return offline_home


def test_with_network_the_missing_corpus_and_senteval_are_downloaded_first(networked_home, senteval_dir,
                                                                           tmp_path, monkeypatch):
    corpus = tmp_path / "wiki1m_for_simcse.txt"
    corpus.write_text("first sentence\nsecond sentence\n")
    archive = tmp_path / "senteval.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(senteval_dir, arcname="senteval")
    monkeypatch.setattr(download, "WIKI1M_URL", corpus.as_uri())
    monkeypatch.setattr(download, "DEFAULT_URL", archive.as_uri())
    config = load_config("simcse", cli.paper_setting_overrides())
    assert cli._missing_corpus(config.data.corpus) and cli._missing_senteval(config.data.dev_dir)
    cli.require_paper_setting(config)  # raises if anything is still missing
    assert (networked_home / ".cache" / "cselab" / "wiki1m_for_simcse.txt").read_bytes() == corpus.read_bytes()
    assert cli._missing_senteval(config.data.dev_dir) is None


def test_print_config_downloads_nothing(networked_home, monkeypatch, capsys):
    monkeypatch.setattr(download, "download_file", lambda *a, **k: pytest.fail("print-config downloaded"))
    monkeypatch.setattr(download, "download", lambda *a, **k: pytest.fail("print-config downloaded"))
    err = train_error(["train", "--recipe", "simcse", "--paper-setting", "--print-config"], capsys)
    assert "download failed" not in err and "`cselab data download wiki1m`" in err


def test_failed_downloads_are_named_in_the_one_line_error_and_leave_no_file(networked_home, monkeypatch, capsys):
    monkeypatch.setattr(download, "WIKI1M_URL", "http://127.0.0.1:9/wiki1m_for_simcse.txt")
    monkeypatch.setattr(download, "DEFAULT_URL", "http://127.0.0.1:9/senteval.tar")
    before = files_under(networked_home)
    err = train_error(["train", "--recipe", "simcse", "--paper-setting"], capsys)
    assert err.count("\n") == 1 and "model bert-base-uncased" not in err
    assert "`cselab data download wiki1m`" in err and "`cselab data download`" in err
    assert "wiki1m_for_simcse.txt (download failed: http://127.0.0.1:9/wiki1m_for_simcse.txt: cannot download" in err
    # No connection for the first piece: the second is not tried (a dead network costs one timeout).
    assert err.count("download failed") == 1 and "SentEval data in" in err
    assert [p for p in files_under(networked_home) - before if not p.is_dir()] == []


def test_nothing_is_downloaded_for_a_model_that_cannot_load(networked_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(download, "download_file", lambda *a, **k: pytest.fail("downloaded for a missing model"))
    monkeypatch.setattr(download, "download", lambda *a, **k: pytest.fail("downloaded for a missing model"))
    model_dir = tmp_path / "typo-model"
    model_dir.mkdir()
    err = train_error(["train", "--paper-setting", "--set", f"model.name_or_path={model_dir}"], capsys)
    assert f"model {model_dir} (an empty folder; a model directory holds config.json" in err
    assert "download failed" not in err


def test_a_corpus_the_user_chose_is_not_overwritten_by_a_download(networked_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(download, "download_file", lambda *a, **k: pytest.fail("downloaded into the user's path"))
    monkeypatch.setattr(download, "download", lambda *a, **k: pytest.fail("downloaded into the user's path"))
    err = train_error(["train", "--paper-setting", "--corpus", str(tmp_path / "c.txt"),
                       "--set", f"data.dev_dir={tmp_path / 'sent'}"], capsys)
    assert f"--dest {tmp_path / 'c.txt'}" in err and "download failed" not in err


def test_pretrain_has_no_paper_setting(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["pretrain", "--paper-setting"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --paper-setting" in capsys.readouterr().err


def test_wiki1m_download_from_file_url(offline_home, tmp_path, capsys):
    source = tmp_path / "wiki1m_for_simcse.txt"
    source.write_text("first sentence\nsecond sentence\n")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert cli.main(["data", "download", "wiki1m", "--url", source.as_uri(), "--sha256", digest]) == 0
    out = capsys.readouterr().out
    dest = offline_home / ".cache" / "cselab" / "wiki1m_for_simcse.txt"
    assert dest.read_bytes() == source.read_bytes()
    assert digest in out and "huggingface-cli download bert-base-uncased" in out
    assert cli.main(["data", "download", "wiki1m", "--url", source.as_uri()]) == 0
    assert "already there" in capsys.readouterr().out
    assert sorted(p.name for p in dest.parent.iterdir()) == ["wiki1m_for_simcse.txt"]  # no partial file left


@pytest.mark.parametrize("problem", ["unreachable", "checksum"])
def test_failed_wiki1m_download_is_one_line_and_leaves_nothing(problem, tmp_path, capsys):
    source = tmp_path / "source.txt"
    source.write_text("a sentence\n")
    dest = tmp_path / "out" / "wiki1m.txt"
    url = "http://127.0.0.1:9/wiki1m_for_simcse.txt" if problem == "unreachable" else source.as_uri()
    assert cli.main(["data", "download", "wiki1m", "--dest", str(dest), "--url", url, "--sha256", "0" * 64]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # the lines before it are the progress bar's
    assert err.startswith("cselab data: error: http") or err.startswith("cselab data: error: file")
    assert ("cannot download" if problem == "unreachable" else "does not match the expected") in err
    assert not dest.exists() and list(dest.parent.iterdir()) == []


PAPER_DOC = DOCS / "paper-setting.md"


def test_doc_commands_parse_and_name_shipped_recipes():
    from cselab.config import list_recipes

    commands = doc_commands(PAPER_DOC)
    trained = {shlex.split(c)[3] for c in commands if c.startswith("cselab train --recipe")}
    assert {"simcse", "una", "una-paraphrase", "focal", "sda-pi", "sda-aa", "sda-dn", "augcse",
            "clear-del-word"} <= trained <= set(list_recipes())
    for command in commands:
        args = cli.build_parser().parse_args(shlex.split(command)[1:])
        assert callable(args.func)
        if command.startswith("cselab train"):
            assert args.paper_setting
