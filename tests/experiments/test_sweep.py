"""The sweep's bookkeeping with a stand-in trainer and evaluator (what runs, what is skipped, what resumes)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from senteval_files import make_senteval

from cselab.config import ConfigError, list_recipes
from cselab.experiments import ExperimentError
from cselab.experiments.sweep import SweepSettings, SweepStopped, parse_recipes, parse_seeds, plan, run_sweep


class FakeTrainer:
    """Writes what the training loop writes (config, summary, a weights file); records its calls."""

    def __init__(self, finish: bool = True):
        self.calls: list[tuple[str, int]] = []
        self.finish = finish

    def __call__(self, config, progress):
        out = Path(config.train.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(json.dumps(config.to_dict()))
        (out / "model.safetensors").write_bytes(f"{config.recipe}-{config.train.seed}".encode())
        (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
        summary = {"recipe": config.recipe, "finished": self.finish, "steps": 1, "total_steps": 1}
        (out / "summary.json").write_text(json.dumps(summary))
        self.calls.append((config.recipe, config.train.seed))
        return summary


class FakeEvaluator:
    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.tasks: list[list[str]] = []

    def __call__(self, job, settings, names):
        self.calls.append((job.config.recipe, job.seed))
        self.tasks.append(list(names))
        score = 70.0 + job.seed + (3.0 if job.config.recipe == "focal" else 0.0)
        return {"split": settings.eval_split, "tasks": {n: {"score": score} for n in names if n != "align"},
                "avg": score, "transfer_avg": None}


@pytest.fixture
def settings(tmp_path) -> SweepSettings:
    data = make_senteval(tmp_path / "senteval")
    return SweepSettings(recipes=["simcse", "focal"], seeds=[1, 2], out=tmp_path / "sweep", data_dir=data,
                         tasks="sts", progress=False)


def test_parse_recipes_and_seeds():
    assert parse_recipes("simcse, una,simcse") == ["simcse", "una"]
    assert parse_recipes("all") == list_recipes()
    assert parse_seeds("42,0,1") == [42, 0, 1]
    with pytest.raises(ExperimentError, match="not an integer"):
        parse_seeds("1,one")
    with pytest.raises(ExperimentError, match="no seed"):
        parse_seeds(",")
    with pytest.raises(ExperimentError, match="outside"):
        parse_seeds("-1")


def test_plan_gives_each_run_its_directory_seed_and_dev_data(settings):
    jobs = plan(settings)
    assert [(j.recipe, j.seed) for j in jobs] == [("simcse", 1), ("simcse", 2), ("focal", 1), ("focal", 2)]
    for job in jobs:
        assert job.path == settings.out / job.recipe / f"seed-{job.seed}"
        assert job.config.train.output_dir == str(job.path) and job.config.train.seed == job.seed
        assert job.config.data.dev_dir == str(settings.data_dir)
    settings.overrides = ["train.seed=3"]
    with pytest.raises(ExperimentError, match="--seeds"):
        plan(settings)
    settings.overrides = ["optim.lr=-1"]
    with pytest.raises(ConfigError, match="optim.lr"):
        plan(settings)


def test_second_sweep_does_nothing_and_a_lost_result_is_redone(settings):
    trainer, evaluator = FakeTrainer(), FakeEvaluator()
    data = run_sweep(settings, trainer, evaluator)
    assert trainer.calls == evaluator.calls == [("simcse", 1), ("simcse", 2), ("focal", 1), ("focal", 2)]
    stored = json.loads((settings.out / "sweep.json").read_text())
    assert stored["aggregate"] == json.loads(json.dumps(data["aggregate"]))
    focal = stored["aggregate"]["sts"]["rows"]["focal"]["avg"]
    assert focal["mean"] == pytest.approx((73.0 + 1 + 73.0 + 2) / 2) and focal["n"] == 2
    assert all(r["eval"]["avg"] is not None for r in stored["runs"])
    versions = json.loads((settings.out / "focal" / "seed-1" / "versions.json").read_text())
    assert {"train", "eval"} <= set(versions)
    assert versions["train"]["python"] and versions["train"]["torch"] and versions["eval"]["cselab"]

    trainer.calls.clear(), evaluator.calls.clear()
    data = run_sweep(settings, trainer, evaluator)
    assert trainer.calls == [] and evaluator.calls == []
    assert set(data["last_invocation"]["did"]["focal seed 2"].values()) == {"skipped"}

    (settings.out / "focal" / "seed-2" / "eval-dev.json").unlink()
    run_sweep(settings, trainer, evaluator)
    assert trainer.calls == [] and evaluator.calls == [("focal", 2)]

    # new weights (a retrained model) make the stored result stale
    (settings.out / "simcse" / "seed-1" / "model.safetensors").write_bytes(b"other weights")
    evaluator.calls.clear()
    run_sweep(settings, trainer, evaluator)
    assert evaluator.calls == [("simcse", 1)]


def test_a_task_added_later_is_evaluated_alone_and_merged_with_the_stored_ones(settings):
    from cselab.evaluate.runner import evaluate

    settings.recipes, settings.seeds, settings.tasks = ["simcse"], [1], "STSBenchmark,SICKRelatedness"
    settings.transfer_mode = "fast"
    trainer = FakeTrainer()

    def real_evaluator(job, settings, names):  # the real runner on a stand-in encoder
        evaluator(job, settings, names)
        return evaluate(HashEncoder(), settings.data_dir, names, split="dev", transfer_mode="fast", progress=False)

    evaluator = FakeEvaluator()
    run_sweep(settings, trainer, real_evaluator)
    result_file = settings.out / "simcse" / "seed-1" / "eval-dev.json"
    first = json.loads(result_file.read_text())
    assert first["transfer_avg"] is None

    settings.tasks = "STSBenchmark,SST2"
    run_sweep(settings, trainer, real_evaluator)
    assert evaluator.tasks == [["STSBenchmark", "SICKRelatedness"], ["SST2"]]
    merged = json.loads(result_file.read_text())
    assert list(merged["tasks"]) == ["STSBenchmark", "SICKRelatedness", "SST2"]
    assert merged["sweep"]["tasks"] == ["STSBenchmark", "SICKRelatedness", "SST2"]
    for name in ("STSBenchmark", "SICKRelatedness"):
        assert merged["tasks"][name] == first["tasks"][name]
    assert merged["avg"] == pytest.approx(first["avg"])
    assert merged["transfer_avg"] == pytest.approx(merged["tasks"]["SST2"]["score"])
    assert merged["transfer_avg_over"] == ["SST2"]
    assert set(merged["seconds"]) == {"STSBenchmark", "SICKRelatedness", "SST2"}

    # every asked task stored: nothing to do; another probe mode: everything again
    run_sweep(settings, trainer, real_evaluator)
    assert len(evaluator.tasks) == 2
    settings.transfer_mode = "test"
    run_sweep(settings, trainer, real_evaluator)
    assert evaluator.tasks[2:] == [["STSBenchmark", "SST2"]]
    assert list(json.loads(result_file.read_text())["tasks"]) == ["STSBenchmark", "SST2"]


class HashEncoder:
    """Deterministic 16-d vectors from a sentence's words: enough for the probes to run."""

    def encode(self, sentences):
        import numpy as np

        out = np.zeros((len(sentences), 16), dtype=np.float32)
        for i, sentence in enumerate(sentences):
            for word in sentence.lower().split():
                out[i, sum(map(ord, word)) % 16] += 1.0
        return out + 1e-3


def test_unfinished_training_is_resumed_and_a_stop_ends_the_sweep(settings):
    trainer = FakeTrainer(finish=False)
    with pytest.raises(SweepStopped, match="run the same command again"):
        run_sweep(settings, trainer, FakeEvaluator())
    assert trainer.calls == [("simcse", 1)]
    assert json.loads((settings.out / "sweep.json").read_text())["runs"][0]["finished"] is False
    trainer.finish = True
    run_sweep(settings, trainer, FakeEvaluator())
    assert trainer.calls[1:] == [("simcse", 1), ("simcse", 2), ("focal", 1), ("focal", 2)]


def test_a_run_made_with_other_settings_is_refused(settings):
    run_sweep(settings, FakeTrainer(), FakeEvaluator())
    settings.overrides = ["optim.lr=1e-5"]
    with pytest.raises(ExperimentError, match="different optim.lr"):
        run_sweep(settings, FakeTrainer(), FakeEvaluator())


def test_evaluation_data_is_checked_before_training(settings, tmp_path):
    trainer = FakeTrainer()
    settings.data_dir = None
    with pytest.raises(ExperimentError, match="--no-eval"):
        run_sweep(settings, trainer, FakeEvaluator())
    settings.data_dir = tmp_path / "empty"
    settings.data_dir.mkdir()
    with pytest.raises(FileNotFoundError, match="not found"):
        run_sweep(settings, trainer, FakeEvaluator())
    assert trainer.calls == []
    settings.evaluate = False
    data = run_sweep(settings, trainer, FakeEvaluator())
    assert len(trainer.calls) == 4 and data["aggregate"] == {} and data["eval_split"] is None
    assert data["last_invocation"]["evaluate"] is False


def test_a_study_in_several_invocations_aggregates_every_run_in_out(settings):
    settings.recipes = ["simcse"]
    run_sweep(settings, FakeTrainer(), FakeEvaluator())
    settings.recipes = ["focal"]
    data = run_sweep(settings, FakeTrainer(), FakeEvaluator())
    assert sorted((r["recipe"], r["seed"]) for r in data["runs"]) == [("focal", 1), ("focal", 2),
                                                                       ("simcse", 1), ("simcse", 2)]
    assert set(data["aggregate"]["sts"]["rows"]) == {"simcse", "focal"}
    assert list(data["last_invocation"]["did"]) == ["focal seed 1", "focal seed 2"]
