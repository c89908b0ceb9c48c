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
        self.base_dev: list[dict | None] = []  # the known base-model scores each call was given
        self.finish = finish

    def __call__(self, config, progress, base_dev=None):
        out = Path(config.train.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(json.dumps(config.to_dict()))
        (out / "model.safetensors").write_bytes(f"{config.recipe}-{config.train.seed}".encode())
        (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
        for step in (1, 2):  # what the loop's checkpoints leave: two steps, the encoder a link to the model
            (out / "checkpoints" / f"step-{step}").mkdir(parents=True, exist_ok=True)
            (out / "checkpoints" / f"step-{step}" / "optimizer.safetensors").write_bytes(b"x" * 1000)
        summary = {"recipe": config.recipe, "finished": self.finish, "steps": 1, "total_steps": 1,
                   "base_stsb_dev": 50.0 + len(self.calls), "precision": {"precision": "fp32"}}
        (out / "summary.json").write_text(json.dumps(summary))
        self.calls.append((config.recipe, config.train.seed))
        self.base_dev.append(base_dev)
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


def test_grid_is_crossed_with_recipes_and_seeds_and_each_point_has_a_folder_named_by_its_values(settings):
    from cselab.experiments.sweep import parse_grid

    settings.grid = parse_grid(["optim.lr=1e-5,3e-5", "optim.batch_size=8,16"])
    jobs = plan(settings)
    assert len(jobs) == 2 * 2 * 2 * 2
    first = jobs[0]
    assert first.values == {"optim.lr": "1e-5", "optim.batch_size": "8"} and first.config.optim.lr == 1e-5
    assert first.path == settings.out / "simcse" / "optim.lr=1e-5,optim.batch_size=8" / "seed-1"
    assert first.name == "simcse optim.lr=1e-5 optim.batch_size=8 seed 1"
    assert {(j.config.optim.lr, j.config.optim.batch_size, j.seed) for j in jobs if j.recipe == "focal"} == {
        (lr, batch, seed) for lr in (1e-5, 3e-5) for batch in (8, 16) for seed in (1, 2)}
    assert len({j.path for j in jobs}) == len(jobs)
    for bad, message in ((["optim.lr"], "expected KEY=V1,V2"), (["optim.lr=1,2", "optim.lr=3"], "given twice"),
                         (["train.seed=1,2"], "--seeds"), (["optim.lr=1,1"], "listed twice")):
        with pytest.raises(ExperimentError, match=message):
            parse_grid(bad)
    with pytest.raises(ExperimentError, match="also given with --set"):
        parse_grid(["optim.lr=1,2"], ["optim.lr=3"])
    settings.grid = parse_grid(["optim.nonsense=1,2"])
    with pytest.raises(ConfigError, match="nonsense"):
        plan(settings)


def test_a_grid_sweep_reports_one_row_per_point_and_a_table_per_varied_key(settings, tmp_path):
    from cselab.experiments.report import write_report
    from cselab.experiments.sweep import parse_grid

    settings.grid = parse_grid(["optim.lr=1e-5,3e-5"])
    data = run_sweep(settings, FakeTrainer(), FakeEvaluator())
    assert set(data["aggregate"]["sts"]["rows"]) == {"simcse lr=1e-05", "simcse lr=3e-05", "focal lr=1e-05",
                                                     "focal lr=3e-05"}
    text = write_report([settings.out], tmp_path / "report")["markdown"].read_text()
    assert "| simcse lr=3e-05 | 2 |" in text
    assert "simcse was run with several settings; the tests compare with simcse lr=1e-05" in text
    assert "## Hyper-parameters" in text and "focal, optim.lr:" in text
    # the fake evaluator scores focal 73 + seed whatever the lr: each value's mean over seeds is 74.5
    assert "| 1e-05 | 2 | 74.50 ± 0.71 |" in text


def test_status_lines_read_naturally(settings):
    lines = []
    run_sweep(settings, FakeTrainer(), FakeEvaluator(), echo=lines.append)
    assert lines[0] == "simcse seed 1: trained; evaluated"
    lines.clear()
    run_sweep(settings, FakeTrainer(), FakeEvaluator(), echo=lines.append)
    assert lines[0] == "simcse seed 1: already trained; already evaluated"
    assert not any("training trained" in line or "evaluation evaluated" in line for line in lines)


def test_checkpoints_of_finished_runs_can_be_dropped_and_the_disk_use_is_counted(settings):
    data = run_sweep(settings, FakeTrainer(), FakeEvaluator())
    assert data["disk"]["checkpoint_bytes"] == 4 * 2 * 1000 and data["disk"]["bytes"] > 8000
    settings.keep_checkpoints = "last"
    run_sweep(settings, FakeTrainer(), FakeEvaluator())  # also for runs trained before
    folder = settings.out / "simcse" / "seed-1" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["step-2"]
    settings.keep_checkpoints = "none"
    data = run_sweep(settings, FakeTrainer(), FakeEvaluator())
    assert not folder.exists() and data["disk"]["checkpoint_bytes"] == 0
    assert (settings.out / "simcse" / "seed-1" / "model.safetensors").is_file()
    from cselab.experiments.cli import disk_sentence

    assert disk_sentence({"bytes": 2_500_000, "checkpoint_bytes": 2_000_000, "keep_checkpoints": "all"}, "out") == (
        "out holds 2.5 MB, 2.0 MB of it in checkpoints (--keep-checkpoints none removes those of finished runs; "
        "their models stay).")


def test_the_base_models_dev_score_is_measured_once_per_base_model(settings, tmp_path):
    model = tmp_path / "base-model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"base weights")
    settings.overrides = [f"model.name_or_path={model}"]
    trainer = FakeTrainer()
    run_sweep(settings, trainer, FakeEvaluator())
    # the first run measured it (the fake says 50.0); every later run from the same encoder is given it
    assert trainer.base_dev == [None] + [{"fp32": {"stsb_dev": 50.0}}] * 3
    cache = json.loads((settings.out / "base-stsb-dev.json").read_text())
    [entry] = cache.values()
    assert entry["fp32"]["measured_by"] == "simcse seed 1"
    # other weights (or another pooler) are another base model
    (model / "model.safetensors").write_bytes(b"other base weights")
    settings.out = tmp_path / "sweep2"
    settings.seeds = [1]
    settings.overrides.append("model.pooler=cls")
    trainer = FakeTrainer()
    run_sweep(settings, trainer, FakeEvaluator())
    assert trainer.base_dev == [None, {"fp32": {"stsb_dev": 50.0}}]


def test_a_long_grid_value_gets_a_short_unique_folder():
    from cselab.experiments.sweep import FOLDER_NAME_LIMIT, point_folder

    short = point_folder({"data.corpus": "data/wiki.txt", "optim.lr": "1e-5"})
    assert short == "data.corpus=data_wiki.txt,optim.lr=1e-5"
    first = point_folder({"model.from_config": '{"model_type": "bert", "hidden_size": 32, ' + "x" * 200 + "}"})
    second = point_folder({"model.from_config": '{"model_type": "bert", "hidden_size": 32, ' + "x" * 201 + "}"})
    assert len(first) == len(second) == FOLDER_NAME_LIMIT and first != second
