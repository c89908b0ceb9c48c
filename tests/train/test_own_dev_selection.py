"""``train.select_on: [sts:PATH]``: training keeps the best model on the user's own dev file, with no
SentEval data at all; as a further metric it keeps its own best model in OUTPUT_DIR/best-sts_STEM/.

Tiny random BERTs on generated files (never lines of ../shared)."""
from __future__ import annotations

import json
import random

import pytest

from cselab.cli import format_summary
from cselab.evaluate import evaluate, load_model
from cselab.run_files import BEST_MODEL
from cselab.train.loop import train
from tests.evaluate.senteval_files import make_senteval
from tests.reliability.conftest import load_config_for, metric_records

WORDS = "a man woman dog cat plays runs guitar piano park street eats food reads book fast slowly".split()


@pytest.fixture
def own_dev(tmp_path):
    rng = random.Random(3)
    path = tmp_path / "my dev.jsonl"
    path.write_text("".join(json.dumps({"sentence1": " ".join(rng.choices(WORDS, k=6)),
                                        "sentence2": " ".join(rng.choices(WORDS, k=6)),
                                        "score": rng.randint(1, 10)}) + "\n" for _ in range(40)))
    return path


def test_the_final_model_is_the_best_on_your_own_dev_file(tmp_path, tiny_corpus, own_dev, monkeypatch):
    monkeypatch.delenv("CSELAB_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no SentEval data anywhere: the file is enough
    out = tmp_path / "run"
    summary = train(load_config_for(tiny_corpus, out, **{"train.eval_steps": 3,
                                                          "train.select_on": f"[sts:{own_dev}]"}), progress=False)
    key = "sts_my_dev"
    evaluated = [r for r in metric_records(out) if key in r]
    assert [r["step"] for r in evaluated] == [3, 6, 9, 12]
    best = max(evaluated, key=lambda r: (r[key], -r["step"]))  # higher is better; the first of the best
    assert json.loads((out / BEST_MODEL).read_text()) == {"step": best["step"], key: best[key]}
    assert summary["selected_by"] == key and summary[f"best_{key}"] == best[key]
    assert summary["best_step"] == best["step"] and summary["best_stsb_dev"] is None
    assert summary[f"base_{key}"] is not None  # the starting encoder's score on the file
    assert f"STS file my dev.jsonl {summary[f'base_{key}']:.2f} before training -> {best[key]:.2f}" in \
        format_summary(summary)
    # The saved model scores the same through cselab eval --sts-file (fp32, the training precision).
    model = load_model(str(out), precision="fp32", max_seq_len=32)
    model.show_progress = False
    again = evaluate(model, None, [f"sts:{own_dev}"], progress=False)["tasks"][f"sts:{own_dev}"]["score"]
    assert again == pytest.approx(best[key], abs=1e-4)


def test_own_dev_file_as_a_further_metric_keeps_its_own_best_model(tmp_path, tiny_corpus, own_dev):
    senteval = make_senteval(tmp_path / "senteval")
    out = tmp_path / "run"
    summary = train(load_config_for(tiny_corpus, out, **{"train.eval_steps": 6, "data.dev_dir": str(senteval),
                                                          "train.select_on": f"[stsb_dev, sts:{own_dev}]"}),
                    progress=False)
    evaluated = [r for r in metric_records(out) if "sts_my_dev" in r]
    assert [r["step"] for r in evaluated] == [6, 12] and all("stsb_dev" in r for r in evaluated)
    best = max(evaluated, key=lambda r: (r["sts_my_dev"], -r["step"]))
    marker = json.loads((out / "best-sts_my_dev" / BEST_MODEL).read_text())
    assert marker == {"step": best["step"], "sts_my_dev": best["sts_my_dev"], "tasks": [f"sts:{own_dev}"]}
    assert summary["selected_by"] == "stsb_dev" and summary["best_sts_my_dev"] == best["sts_my_dev"]
    assert "STS file my dev.jsonl" in format_summary(summary)
