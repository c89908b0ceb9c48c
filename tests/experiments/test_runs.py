"""Reading run directories back: discovery, broken files, duplicate runs."""
from __future__ import annotations

import json

import pytest
from fake_runs import make_run

from cselab.experiments import ExperimentError
from cselab.experiments.runs import find_runs, load_run, read_metrics


def test_finds_every_run_below_a_sweep_directory(fake_sweep):
    runs = find_runs([fake_sweep])
    expected = sorted((r, s) for r in ("simcse", "una", "focal") for s in (42, 0, 1))
    assert sorted((r.recipe, r.seed) for r in runs) == expected
    assert all(r.finished and "dev" in r.evals and r.metrics for r in runs)


def test_a_run_directory_named_directly_and_twice_counts_once(fake_sweep):
    path = fake_sweep / "una" / "seed-0"
    runs = find_runs([path, path])
    assert [(r.recipe, r.seed) for r in runs] == [("una", 0)]


def test_the_same_recipe_and_seed_in_two_places_is_refused(tmp_path):
    make_run(tmp_path / "a", "simcse", 1, 70)
    make_run(tmp_path / "b", "simcse", 1, 71)
    with pytest.raises(ExperimentError, match="seed 1 is also"):
        find_runs([tmp_path / "a", tmp_path / "b"])


def test_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        find_runs([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExperimentError, match="no run directories"):
        find_runs([tmp_path / "empty"])
    with pytest.raises(ExperimentError, match="not a run directory"):
        load_run(tmp_path / "empty")
    run = make_run(tmp_path, "simcse", 3, 70)
    (run / "eval-dev.json").write_text("{not json")
    with pytest.raises(ExperimentError, match="eval-dev.json: not valid JSON"):
        load_run(run)


def test_metrics_a_cut_short_last_line_is_skipped_a_bad_middle_line_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 2.0}) + "\n" + '{"step": 2, "lo')
    assert [r["step"] for r in read_metrics(path)] == [1]
    path.write_text('{"step": 1, "lo\n' + json.dumps({"step": 2, "loss": 1.0}) + "\n")
    with pytest.raises(ExperimentError, match=r"metrics.jsonl:1:"):
        read_metrics(path)


def test_runs_of_one_recipe_with_other_settings_are_named_by_the_keys_that_differ(tmp_path):
    for temperature, seed in ((0.05, 1), (0.1, 1), (0.05, 2)):
        path = make_run(tmp_path / f"t{temperature}", "simcse", seed, 70)
        config = json.loads((path / "train_config.json").read_text())
        config["objective"][0]["temperature"] = temperature
        (path / "train_config.json").write_text(json.dumps(config))
    make_run(tmp_path / "una", "una", 1, 70)
    runs = find_runs([tmp_path])
    assert sorted((r.recipe, r.seed) for r in runs) == [("simcse temperature=0.05", 1), ("simcse temperature=0.05", 2),
                                                        ("simcse temperature=0.1", 1), ("una", 1)]
    varied = next(r for r in runs if r.recipe == "simcse temperature=0.1")
    assert varied.recipe_name == "simcse" and varied.variant == {"objective[0].temperature": 0.1}


def test_list_settings_that_change_no_result_do_not_make_a_variant(tmp_path):
    """train.report_to is resume-safe: a run logged live to TensorBoard is the same setting as one that was
    not, also though flatten names its list entries (train.report_to[0])."""
    for seed, loggers in ((1, ["tensorboard"]), (2, [])):
        path = make_run(tmp_path / str(seed), "simcse", seed, 70)
        config = json.loads((path / "train_config.json").read_text())
        config["train"]["report_to"] = loggers
        (path / "train_config.json").write_text(json.dumps(config))
    assert sorted((r.recipe, r.seed) for r in find_runs([tmp_path])) == [("simcse", 1), ("simcse", 2)]


def test_a_setting_a_saved_config_lacks_counts_as_its_default(tmp_path):
    """A run saved before a key existed ran with its default, as resuming counts it: not a variant."""
    for seed, drop in ((1, True), (2, False)):
        path = make_run(tmp_path / str(seed), "simcse", seed, 70)
        config = json.loads((path / "train_config.json").read_text())
        config["train"]["select_on"] = ["stsb_dev"]  # the default
        if drop:
            del config["train"]["select_on"]
        (path / "train_config.json").write_text(json.dumps(config))
    assert sorted((r.recipe, r.seed) for r in find_runs([tmp_path])) == [("simcse", 1), ("simcse", 2)]


def test_drawn_values_are_named_in_four_digits_unless_that_would_merge_two_settings(tmp_path):
    def runs_with(rates):
        for i, lr in enumerate(rates):
            path = make_run(tmp_path / str(rates) / str(i), "simcse", 1, 70)
            config = json.loads((path / "train_config.json").read_text())
            config["optim"]["lr"] = lr
            (path / "train_config.json").write_text(json.dumps(config))
        return sorted(r.recipe for r in find_runs([tmp_path / str(rates)]))

    assert runs_with([3.1622776601683795e-05, 1e-4]) == ["simcse lr=0.0001", "simcse lr=3.162e-05"]
    assert runs_with([3.16221e-05, 3.16222e-05]) == ["simcse lr=3.16221e-05", "simcse lr=3.16222e-05"]
