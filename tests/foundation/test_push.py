"""`cselab push MODEL REPO_ID [--private]`: huggingface_hub's client creates the repository and uploads
the directory (a stand-in for the client here, never the network); offline, without a token or with
the Hub out of reach it is one line, exit 2."""
from __future__ import annotations

import huggingface_hub
import pytest
import yaml

import cselab
from cselab.cli import main
from cselab.model.card import write_card
from cselab.model.encoder import SentenceEncoder
from tests.conftest import TINY_BERT


class FakeHub:
    """Records what cselab asks of huggingface_hub.HfApi."""

    calls: list = []
    fail: Exception | None = None

    def __init__(self, token=None):
        self.calls.append(("init", token))

    def create_repo(self, repo_id, private=False, exist_ok=False, repo_type=None):
        if self.fail is not None:
            raise self.fail
        self.calls.append(("create_repo", repo_id, private, exist_ok, repo_type))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, repo_id, folder_path, repo_type=None, ignore_patterns=None, commit_message=None):
        self.calls.append(("upload_folder", repo_id, folder_path, repo_type, tuple(ignore_patterns or ())))


@pytest.fixture
def online(monkeypatch):
    """The Hub switched on (the tests run with HF_HUB_OFFLINE=1), the client replaced, a token present."""
    import huggingface_hub.constants  # noqa: F401 - a lazy submodule: loaded before it is patched

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(FakeHub, "calls", [])
    monkeypatch.setattr(FakeHub, "fail", None)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_test_token")
    return FakeHub


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="avg").save(tmp_path_factory.mktemp("push") / "m")


def test_push_creates_the_repository_and_uploads_the_directory(online, saved, capsys):
    assert main(["push", str(saved), "someone/tiny-model", "--private"]) == 0
    calls = [c for c in online.calls if c[0] != "init"]
    assert ("init", "hf_test_token") in online.calls
    assert calls[0] == ("create_repo", "someone/tiny-model", True, True, "model")
    assert calls[1][:4] == ("upload_folder", "someone/tiny-model", str(saved), "model")
    assert "checkpoints/*" in calls[1][4] and "best-*/*" in calls[1][4]
    assert "https://huggingface.co/someone/tiny-model" in capsys.readouterr().out
    card = (saved / "README.md").read_text()
    assert 'SentenceTransformer("someone/tiny-model")' in card  # the snippets load the repository
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["library_name"] == "sentence-transformers"
    write_card(saved)  # rewritten later (an evaluation, the end of a run): it still loads the repository
    assert 'cselab.load("someone/tiny-model")' in (saved / "README.md").read_text()


def test_a_pushed_model_saved_again_in_place_still_names_its_repository(online, tmp_path):
    path = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="avg").save(tmp_path / "m")
    assert main(["push", str(path), "someone/tiny-model"]) == 0
    cselab.load(str(path)).save(path)  # e.g. the re-save the old-format warning suggests
    assert 'SentenceTransformer("someone/tiny-model")' in (path / "README.md").read_text()


def test_public_by_default(online, saved):
    assert main(["push", str(saved), "someone/tiny-model"]) == 0
    assert next(c for c in online.calls if c[0] == "create_repo")[2] is False


@pytest.mark.parametrize("setup,fragment", [
    (lambda mp, hub: mp.setenv("HF_HUB_OFFLINE", "1"), "HF_HUB_OFFLINE"),
    (lambda mp, hub: mp.setattr(huggingface_hub, "get_token", lambda: None), "no Hugging Face token"),
    (lambda mp, hub: mp.setattr(hub, "fail", ConnectionError("Max retries exceeded\nwith url")),
     "could not be reached or refused the upload (Max retries exceeded)"),
])
def test_what_is_missing_is_one_line_exit_2(online, saved, monkeypatch, capsys, setup, fragment):
    setup(monkeypatch, online)
    assert main(["push", str(saved), "someone/tiny-model"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
    assert not [c for c in online.calls if c[0] == "upload_folder"]


@pytest.mark.parametrize("repo_id,fragment", [("no-owner", "OWNER/NAME"), ("bad//id", "not a Hub repository id")])
def test_a_bad_repository_id_is_one_line(online, saved, capsys, repo_id, fragment):
    assert main(["push", str(saved), repo_id]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_a_directory_that_is_no_model_is_one_line(online, tmp_path, capsys):
    assert main(["push", str(tmp_path), "someone/x"]) == 2
    assert "not a saved model (no modules.json)" in capsys.readouterr().err


def test_every_cselab_command_in_the_sentence_transformers_doc_parses():
    import shlex

    from cselab.cli import build_parser
    from tests.evaluate.doc_commands import DOCS, doc_commands

    commands = doc_commands(DOCS / "sentence-transformers.md")
    assert any(c.startswith("cselab push") for c in commands) and any("--update-card" in c for c in commands)
    for command in commands:
        assert callable(build_parser().parse_args(shlex.split(command)[1:]).func), command
