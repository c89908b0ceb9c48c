"""The sweep's transfer probes default to fast (issue 39, item 8): on a CPU, SentEval's test protocol spends
minutes per run on SST-2 alone. A study evaluated before in test mode keeps its mode; the flag wins."""
from __future__ import annotations

import json

from cselab.cli import build_parser
from cselab.experiments.cli import sweep_settings


def settings_for(out, *flags):
    args = build_parser().parse_args(["sweep", "--recipes", "simcse", "--out", str(out), "--no-eval", *flags])
    return sweep_settings(args)


def test_a_new_sweep_evaluates_with_fast_probes(tmp_path):
    assert settings_for(tmp_path / "study").transfer_mode == "fast"


def test_a_study_evaluated_in_test_mode_keeps_it(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"last_invocation": {"transfer_mode": "test"}}))
    assert settings_for(out).transfer_mode == "test"
    assert settings_for(out, "--transfer-mode", "fast").transfer_mode == "fast"


def test_the_flag_asks_for_the_papers_protocol(tmp_path):
    assert settings_for(tmp_path / "study", "--transfer-mode", "test").transfer_mode == "test"


def test_the_readme_sweep_says_how_to_get_the_numbers_you_report():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    sweeps = readme.split("## Experiments and reports")[1].split("## Reliability")[0]
    assert "--transfer-mode fast" in sweeps and "--eval-split test --transfer-mode test" in sweeps
