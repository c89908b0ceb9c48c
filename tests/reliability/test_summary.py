"""The end-of-run summary shows where training started: the base model's STS-B dev next to the
best one, and the precision the scores were computed in."""
from __future__ import annotations

import json

from cselab.cli import format_summary
from cselab.train.loop import train
from tests.reliability.conftest import load_config_for


def test_the_summary_has_the_base_models_dev_score(tmp_path, corpus_file, stsb_dev_dir, capsys):
    out_dir = tmp_path / "run"
    config = load_config_for(corpus_file, out_dir, **{"train.eval_steps": 4, "data.dev_dir": str(stsb_dev_dir)})
    summary = train(config, progress=False)
    assert isinstance(summary["base_stsb_dev"], float) and isinstance(summary["best_stsb_dev"], float)
    assert "STS-B dev before training" in capsys.readouterr().out
    line = next(line for line in format_summary(summary).splitlines() if "STS-B dev" in line)
    assert f"{summary['base_stsb_dev']:.2f} before training -> {summary['best_stsb_dev']:.2f}" in line
    assert "fp32" in line
    assert json.loads((out_dir / "summary.json").read_text())["base_stsb_dev"] == summary["base_stsb_dev"]
