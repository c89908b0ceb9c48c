"""``cselab sweep --search``: the space, the Optuna study (pruning, resuming) with a stand-in trainer, and
two real trials of a tiny model."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from senteval_files import make_senteval

from cselab.experiments import ExperimentError
from cselab.experiments.search import Dimension, parse_space, run_search
from cselab.experiments.sweep import SweepSettings, SweepStopped
from tests.conftest import TINY_BERT

pytest.importorskip("optuna")

LR = [Dimension("optim.lr", 1e-5, 1e-3, log=True)]


def score(lr: float) -> float:
    """The stand-in's dev score: best at lr = 1e-4."""
    return 80.0 - 10.0 * abs(math.log10(lr) + 4.0)


class SearchTrainer:
    """Writes a run's files and reports two evaluations to the hook, as the training loop does."""

    def __init__(self, stop_at_call: int | None = None, bad_from_call: int | None = None):
        self.calls: list[Path] = []
        self.stop_at_call, self.bad_from_call = stop_at_call, bad_from_call

    def __call__(self, config, progress, base_dev=None, on_evaluation=None):
        out = Path(config.train.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.calls.append(out)
        (out / "train_config.json").write_text(json.dumps(config.to_dict()))
        (out / "model.safetensors").write_bytes(repr(config.optim.lr).encode())
        value = score(config.optim.lr) - (50.0 if self.bad_from_call and len(self.calls) >= self.bad_from_call else 0)
        records, steps, best = [], 0, None
        with (out / "metrics.jsonl").open("a") as metrics:
            for step in (1, 2):
                if len(self.calls) == self.stop_at_call and step == 2:  # Ctrl-C after step 1
                    break
                record = {"step": step, "loss": 1.0, "stsb_dev": value + step}
                metrics.write(json.dumps(record) + "\n")
                records.append(record)
                steps, best = step, max(best or -1e9, record["stsb_dev"])
                if on_evaluation(step, record):
                    break
        summary = {"finished": steps == 2, "steps": steps, "total_steps": 2, "best_stsb_dev": best, "best_step": steps}
        (out / "summary.json").write_text(json.dumps(summary))
        return summary


@pytest.fixture
def settings(tmp_path) -> SweepSettings:
    data = make_senteval(tmp_path / "senteval")
    return SweepSettings(recipes=["simcse"], seeds=[7], out=tmp_path / "search", data_dir=data, evaluate=False,
                         progress=False)


def test_space_parsing():
    assert parse_space(["optim.lr=1e-5:1e-4:log", "optim.batch_size=16:128"]) == [
        Dimension("optim.lr", 1e-5, 1e-4, log=True), Dimension("optim.batch_size", 16, 128, integer=True)]
    for bad, message in ((["optim.lr"], "expected KEY=LOW:HIGH"), (["optim.lr=1:2:lin"], "expected KEY=LOW:HIGH"),
                         (["optim.lr=2:1"], "LOW must be below HIGH"), (["optim.lr=0:1:log"], "LOW > 0"),
                         (["optim.lr=a:1"], "not a number"), (["optim.lr=1:2", "optim.lr=1:3"], "given twice"),
                         (["train.seed=1:9"], "--seeds"), ([], "at least one --space")):
        with pytest.raises(ExperimentError, match=message):
            parse_space(bad)
    with pytest.raises(ExperimentError, match="also given with --set"):
        parse_space(["optim.lr=1:2"], ["optim.lr=3"])


def test_a_search_runs_n_trials_keeps_the_best_and_resumes_an_interrupted_trial(settings):
    trainer = SearchTrainer(stop_at_call=2)
    with pytest.raises(SweepStopped, match="run the same command again"):
        run_search(settings, 3, LR, trainer=trainer)
    interrupted = trainer.calls[1]
    data = run_search(settings, 3, LR, trainer=trainer)
    assert trainer.calls[2] == interrupted  # the same values, the same run directory: resumed
    study = data["studies"]["simcse"]
    states = [t["state"] for t in study["trials"]]
    assert states.count("complete") + states.count("pruned") == 3 and states.count("fail") == 1
    complete = [t for t in study["trials"] if t["state"] == "complete"]
    assert study["best"]["value"] == max(t["value"] for t in complete)
    assert study["best"]["value"] == pytest.approx(score(study["best"]["params"]["optim.lr"]) + 2)
    for trial in complete:  # each trial's folder is named by its values
        lr = trial["params"]["optim.lr"]
        assert Path(trial["path"]).parent.name == f"optim.lr={lr!r}"
        assert json.loads((Path(trial["path"]) / "train_config.json").read_text())["optim"]["lr"] == lr
    stored = json.loads((settings.out / "search.json").read_text())
    assert stored["studies"]["simcse"]["best"] == json.loads(json.dumps(study["best"]))
    # the study is done: running again trains nothing; a larger N continues it
    calls = len(trainer.calls)
    run_search(settings, 3, LR, trainer=trainer)
    assert len(trainer.calls) == calls
    data = run_search(settings, 4, LR, trainer=trainer)
    assert len(trainer.calls) == calls + 1
    assert sum(t["state"] in ("complete", "pruned") for t in data["studies"]["simcse"]["trials"]) == 4


def test_a_trial_below_the_median_is_pruned_and_not_evaluated(settings):
    trainer = SearchTrainer(bad_from_call=3)
    lines = []
    data = run_search(settings, 3, LR, trainer=trainer, echo=lines.append)
    trials = data["studies"]["simcse"]["trials"]
    assert [t["state"] for t in trials] == ["complete", "complete", "pruned"]
    assert trials[2]["pruned_at"] == 1
    assert "pruned at step 1" in lines[-1]
    summary = json.loads((Path(trials[2]["path"]) / "summary.json").read_text())
    assert summary["steps"] == 1 and not (Path(trials[2]["path"]) / "eval-dev.json").exists()


def test_without_a_score_to_optimise_the_search_fails_before_training(settings, monkeypatch, tmp_path):
    monkeypatch.setenv("CSELAB_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.data_dir = None
    trainer = SearchTrainer()
    with pytest.raises(ExperimentError, match="no STS-B dev data was found"):
        run_search(settings, 2, LR, trainer=trainer)
    settings.overrides = ["train.eval_steps=0"]
    with pytest.raises(ExperimentError, match="never evaluates during training"):
        run_search(settings, 2, LR, trainer=trainer)
    settings.overrides = []
    with pytest.raises(ExperimentError, match="validation_fraction"):
        run_search(settings, 2, LR, metric="val_mlm_loss", trainer=trainer)
    settings.seeds = [1, 2]
    with pytest.raises(ExperimentError, match="one seed"):
        run_search(settings, 2, LR, trainer=trainer)
    assert trainer.calls == []


def test_without_optuna_one_line_names_the_install(settings, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ExperimentError, match=r"pip install 'cselab\[tune\]'"):
        run_search(settings, 2, LR, trainer=SearchTrainer())


def test_two_real_trials_of_a_tiny_model(settings, tiny_corpus, cli, capsys):
    args = ["sweep", "--recipes", "simcse", "--search", "2", "--space", "optim.lr=1e-5:1e-3:log",
            "--out", str(settings.out), "--data-dir", str(settings.data_dir), "--no-eval", "--quiet",
            "--keep-checkpoints", "none"]
    for item in (f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}", "optim.max_steps=4",
                 "optim.batch_size=8", "train.precision=fp32", "train.eval_steps=2", "train.save_steps=2"):
        args += ["--set", item]
    assert cli(args) == 0
    out = capsys.readouterr().out
    assert "simcse: 2 trials (0 pruned), best stsb_dev" in out
    assert f"{settings.out} holds " in out and "MB" in out
    study = json.loads((settings.out / "search.json").read_text())["studies"]["simcse"]
    assert [t["state"] for t in study["trials"]] == ["complete", "complete"]
    for trial in study["trials"]:
        summary = json.loads((Path(trial["path"]) / "summary.json").read_text())
        assert summary["finished"] and summary["best_stsb_dev"] == pytest.approx(trial["value"])
        assert not (Path(trial["path"]) / "checkpoints").exists()
    # the report compares the trials as variants of the recipe, by the searched key
    assert cli(["report", str(settings.out)]) == 0
    text = (settings.out / "report" / "report.md").read_text()
    assert "simcse, optim.lr:" in text and "| optim.lr | Runs | STS-B dev |" in text
