"""`cselab eval --mteb`: MTEB's own computation on the SentEval STS files served offline as custom tasks
under MTEB's names, cross-checked against `cselab eval`; the model under its own name; no package, one line."""
from __future__ import annotations

import json
import sys

import pytest

from cselab import cli

STS_NAMES = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"]
CSELAB_NAMES = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]


def _eval(tmp_path, *args: str, name: str = "out") -> dict:
    out = tmp_path / f"{name}.json"
    assert cli.main(["eval", *args, "--json", str(out), "--quiet", "--no-cache", "--precision", "fp32"]) == 0
    return json.loads(out.read_text())


def test_without_mteb_one_line_names_the_pip_command(monkeypatch, capsys, senteval_dir):
    monkeypatch.setitem(sys.modules, "mteb", None)  # `import mteb` fails as where it is not installed
    assert cli.main(["eval", "minilm", "--mteb", "--data-dir", str(senteval_dir), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cselab eval: error: --mteb needs the mteb package: pip install 'cselab[mteb]' "
                   "(or pip install mteb)"]


@pytest.fixture
def offline(monkeypatch):
    pytest.importorskip("mteb")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_offline_sts_tasks_match_cselab_eval(offline, senteval_dir, tmp_path):
    """Every SentEval STS task under its MTEB name, scored by MTEB from the local files; MTEB's result
    files are written (its format: loadable by mteb's TaskResult) under the model's own name."""
    import mteb

    pairs = tmp_path / "own.tsv"
    pairs.write_text("".join(f"pair {i} left side\tpair {i * 7 % 5} right side\t{i % 4}\n" for i in range(12)))
    common = ["minilm", "--data-dir", str(senteval_dir), "--sts-file", str(pairs)]
    through_mteb = _eval(tmp_path, *common, "--mteb", "--mteb-output", str(tmp_path / "mteb"), name="m")
    ours = _eval(tmp_path, *common, "--tasks", "sts", name="c")
    assert list(through_mteb["tasks"]) == [*STS_NAMES, "cselab-sts-own"]
    for mteb_name, name in zip([*STS_NAMES, "cselab-sts-own"], [*CSELAB_NAMES, f"sts:{pairs}"], strict=True):
        entry = through_mteb["tasks"][mteb_name]
        assert entry["main_score"] == "cosine_spearman" and entry["split"] == "test"
        assert entry["score"] == pytest.approx(ours["tasks"][name]["score"], abs=0.01), mteb_name
    folder = tmp_path / "mteb" / "results" / "local__minilm" / through_mteb["mteb_revision"]
    assert through_mteb["mteb_results"] == str(folder) and through_mteb["mteb_model"] == "local/minilm"
    result = mteb.TaskResult.from_disk(folder / "STS12.json")
    assert result.task_name == "STS12" and result.scores["test"][0]["main_score"] * 100 == pytest.approx(
        through_mteb["tasks"]["STS12"]["score"])


def test_each_model_has_its_own_name_and_revision(offline, senteval_dir, tmp_path, tiny_encoder):
    """Two models in folders of the same name are two revisions: one's results are never read as the other's."""
    import torch

    first = tiny_encoder.save(tmp_path / "a" / "model")
    with torch.no_grad():
        for parameter in tiny_encoder.parameters():
            parameter.mul_(1.5)
    second = tiny_encoder.save(tmp_path / "b" / "model")
    output = tmp_path / "shared-results"
    runs = [_eval(tmp_path, str(path), "--mteb", "STSBenchmark", "--data-dir", str(senteval_dir), "--mteb-output",
                  str(output), name=path.parent.name) for path in (first, second)]
    assert runs[0]["mteb_model"] == runs[1]["mteb_model"] == "local/model"
    assert runs[0]["mteb_revision"] != runs[1]["mteb_revision"]
    assert len(list((output / "results" / "local__model").iterdir())) == 2


def test_markdown_is_written_where_markdown_says(offline, senteval_dir, tmp_path, tiny_encoder, monkeypatch):
    """--markdown takes the MTEB table as it takes cselab eval's: there, and not beside --json; alone too."""
    monkeypatch.chdir(tmp_path)  # the default --mteb-output is relative
    model = tiny_encoder.save(tmp_path / "model")
    tables = tmp_path / "tables" / "mteb.md"
    result = _eval(tmp_path, str(model), "--mteb", "STSBenchmark", "--data-dir", str(senteval_dir),
                   "--markdown", str(tables), name="with-json")
    text = tables.read_text()
    assert "| Model (pooler) | STSBenchmark |" in text and f"{result['tasks']['STSBenchmark']['score']:.2f}" in text
    assert not (tmp_path / "with-json.md").exists()
    alone = tmp_path / "alone.md"
    assert cli.main(["eval", str(model), "--mteb", "STSBenchmark", "--data-dir", str(senteval_dir), "--markdown",
                     str(alone), "--quiet", "--no-cache", "--precision", "fp32"]) == 0
    assert "| Model (pooler) | STSBenchmark |" in alone.read_text()


def test_update_card_with_mteb_is_one_line(offline, tmp_path, tiny_encoder, capsys):
    """The card records cselab eval's own tasks: --update-card with --mteb stops before any model is loaded."""
    model = tiny_encoder.save(tmp_path / "model")
    card = (model / "README.md").read_text()
    assert cli.main(["eval", str(model), "--mteb", "--update-card", "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "cselab eval: error: --update-card records cselab eval's results, not MTEB's; run it without --mteb"]
    assert (model / "README.md").read_text() == card and not (model / "cselab_eval.json").exists()


def test_offline_an_mteb_only_task_is_one_line(offline, senteval_dir, capsys):
    assert cli.main(["eval", "minilm", "--mteb", "Banking77Classification", "--data-dir", str(senteval_dir),
                     "--quiet"]) == 2
    assert "only SentEval's STS tasks are served locally" in capsys.readouterr().err


@pytest.mark.shared
def test_mteb_equals_cselab_eval_on_stsb_dev_and_sick_trial(offline, shared_data, tmp_path):
    """The issue's cross-check: MTEB's cosine Spearman on the STS-B dev and SICK trial custom tasks equals
    cselab eval's within 0.01 for the same model (the offline MiniLM base, fp32)."""
    data = shared_data / "senteval-dev"
    through_mteb = _eval(tmp_path, "minilm", "--mteb", "--split", "dev", "--data-dir", str(data), name="m")
    ours = _eval(tmp_path, "minilm", "--split", "dev", "--tasks", "sts", "--data-dir", str(data), name="c")
    assert [through_mteb["tasks"][n]["split"] for n in ("STSBenchmark", "SICK-R")] == ["validation"] * 2
    assert through_mteb["tasks"]["STSBenchmark"]["score"] == pytest.approx(
        ours["tasks"]["STSBenchmark"]["score"], abs=0.01)
    assert through_mteb["tasks"]["SICK-R"]["score"] == pytest.approx(ours["tasks"]["SICKRelatedness"]["score"],
                                                                    abs=0.01)


def test_online_the_named_tasks_are_mtebs_own(senteval_dir, monkeypatch):
    """With the Hub reachable, MTEB's own task (its Hub dataset) is run, not the local copy; --split dev
    and --sts-file stay local. (Task objects only: nothing is downloaded here.)"""
    pytest.importorskip("mteb")
    from cselab.evaluate import mteb_tasks

    monkeypatch.setattr(mteb_tasks, "offline_reason", lambda: None)
    own, local = mteb_tasks.select_tasks("STS12", "test", False, senteval_dir, [])[0], \
        mteb_tasks.select_tasks("STS12", "test", True, senteval_dir, [])[0]
    assert own.metadata.dataset["path"] == "mteb/sts12-sts" and own.metadata.name == local.metadata.name == "STS12"
    assert local.metadata.dataset["path"] == "local/STS12" and local.metadata.main_score == "cosine_spearman"
    dev = mteb_tasks.select_tasks("default", "dev", False, senteval_dir, [])
    assert [(t.metadata.name, t.metadata.eval_splits) for t in dev] == [("STSBenchmark", ["validation"]),
                                                                         ("SICK-R", ["validation"])]
