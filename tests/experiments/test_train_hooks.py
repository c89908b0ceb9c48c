"""train()'s hooks for sweeps: a base-model score measured by an earlier run, and a caller that ends a run."""
from __future__ import annotations

import json

from senteval_files import make_senteval

from cselab.config import load_config
from tests.conftest import TINY_BERT


def _config(tmp_path, corpus, name: str):
    data = make_senteval(tmp_path / "senteval")
    return load_config("simcse", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={corpus}",
                                  "optim.max_steps=4", "optim.batch_size=8", "train.precision=fp32",
                                  "train.eval_steps=2", "train.save_steps=2", "train.log_steps=1",
                                  f"data.dev_dir={data}", f"train.output_dir={tmp_path / name}"])


def test_a_known_base_score_replaces_the_evaluation_before_step_one(tmp_path, tiny_corpus, monkeypatch, capsys):
    from cselab.train.loop import train
    from cselab.train.selection import ModelSelection

    scored = []
    original = ModelSelection.score_base
    monkeypatch.setattr(ModelSelection, "score_base",
                        lambda self, **kwargs: scored.append(1) or original(self, **kwargs))
    summary = train(_config(tmp_path, tiny_corpus, "run"), progress=False,
                    base_dev={"fp32": {"stsb_dev": 12.5}, "bf16": {"stsb_dev": 1.0}})
    assert summary["base_stsb_dev"] == 12.5
    assert not scored  # score_base is the evaluation before step 1 (the later ones score through evaluate)
    assert "STS-B dev before training: 12.50 (measured for an earlier run)" in capsys.readouterr().out
    # another precision's score is not this run's: it measures its own
    scored.clear()
    summary = train(_config(tmp_path, tiny_corpus, "run2"), progress=False, base_dev={"bf16": {"stsb_dev": 1.0}})
    assert summary["base_stsb_dev"] != 1.0 and len(scored) == 1


def test_the_caller_can_end_a_run_after_an_evaluation(tmp_path, tiny_corpus):
    from cselab.train.loop import train

    seen = []

    def prune(step, record):
        seen.append((step, record.get("stsb_dev")))
        return True

    summary = train(_config(tmp_path, tiny_corpus, "run"), progress=False, on_evaluation=prune)
    assert len(seen) == 1 and seen[0][0] == 2 and isinstance(seen[0][1], float)
    assert summary["steps"] == 2 and summary["finished"] is False
