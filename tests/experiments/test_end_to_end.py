"""One real, tiny sweep: 2 recipes x 2 seeds x 3 steps of a 2-layer BERT, evaluated on generated data."""
from __future__ import annotations

import json

import numpy as np
import pytest
from senteval_files import make_senteval

from cselab.experiments.report import write_report
from cselab.experiments.sweep import SweepSettings, run_sweep

TINY_BERT = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 64}


def test_tiny_sweep_trains_evaluates_aggregates_and_resumes(tmp_path, tiny_corpus, cli, capsys):
    data = make_senteval(tmp_path / "senteval")
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}", "optim.max_steps=3",
                 "optim.batch_size=8", "train.precision=fp32", "train.eval_steps=3", "train.save_steps=3",
                 "train.log_steps=1"]
    settings = SweepSettings(recipes=["simcse", "focal"], seeds=[1, 2], out=tmp_path / "sweep", overrides=overrides,
                             data_dir=data, transfer_mode="fast", progress=False)
    first = run_sweep(settings)
    assert {tuple(v.values()) for v in first["last_invocation"]["did"].values()} == {("trained", "evaluated")}
    runs = {(r["recipe"], r["seed"]): r for r in first["runs"]}
    assert set(runs) == {("simcse", 1), ("simcse", 2), ("focal", 1), ("focal", 2)}
    assert all(r["finished"] and r["steps"] == 3 for r in runs.values())
    # the aggregate is the mean of the runs' own evaluation files
    for recipe in ("simcse", "focal"):
        avgs = [json.loads((tmp_path / "sweep" / recipe / f"seed-{s}" / "eval-dev.json").read_text())["avg"]
                for s in (1, 2)]
        assert first["aggregate"]["sts"]["rows"][recipe]["avg"]["mean"] == pytest.approx(np.mean(avgs))
    run_dir = tmp_path / "sweep" / "focal" / "seed-2"
    assert json.loads((run_dir / "train_config.json").read_text())["objective"][0]["name"] == "focal"
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "sweep").rglob("*")
              if p.is_file() and p.name != "sweep.json"}

    second = run_sweep(settings)  # everything done: nothing is trained or evaluated again
    assert {tuple(v.values()) for v in second["last_invocation"]["did"].values()} == {("skipped", "skipped")}
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert second["aggregate"] == first["aggregate"]

    # A run whose summary says unfinished (as after a kill) goes back to the training loop, which resumes
    # from its last checkpoint (step 3 of 3): no step is redone, so the model and its evaluation stand.
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps({**summary, "finished": False}))
    weights = {p: p.stat().st_mtime_ns for p in run_dir.glob("*.safetensors")}
    third = run_sweep(settings)
    assert third["last_invocation"]["did"]["focal seed 2"] == {"training": "resumed", "evaluation": "skipped"}
    assert json.loads(summary_path.read_text())["finished"] is True
    assert {p: p.stat().st_mtime_ns for p in weights} == weights
    assert "resuming from" in capsys.readouterr().out

    args = ["sweep", "--recipes", "simcse,focal", "--seeds", "1,2", "--out", str(tmp_path / "sweep"),
            "--data-dir", str(data), "--transfer-mode", "fast", "--dry-run"]
    for item in overrides:
        args += ["--set", item]
    assert cli(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(line.split()[3:5] == ["trained", "evaluated"] for line in lines)

    text = write_report([tmp_path / "sweep"], tmp_path / "report")["markdown"].read_text()
    assert "| Recipe | Seeds | Precision | STS-B (dev) | SICK-R (trial) | Avg. |" in text
    # the base model's score before training, from the training loop's summary, in the precision it ran in
    base = next(line for line in text.splitlines() if line.startswith("| base model: randomly initialised encoder"))
    # Issue 39 item 12: the random start of seed s is the same for both recipes: 4 runs, 2 measurements.
    assert "| 4 runs (2 measurements) | fp32 (in training) |" in base
    assert "fp32 (precision: fp32; forced) on 4 runs" in text
    assert "(plots/stsb-dev-curves.svg)" in text and "(plots/align-uniform.svg)" in text
    # the versions recorded at sweep time are the installed ones
    from importlib.metadata import version

    row = next(line for line in text.splitlines() if line.startswith("| simcse seed 1 | train |"))
    assert f"| {version('torch')} | {version('transformers')} | {version('sentence-transformers')} |" in row
