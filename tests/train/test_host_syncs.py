"""A training step never reads a tensor back to the host: values are read once per log window.

Counted: every ``Tensor.item``, ``__bool__``, ``__float__`` and ``__int__`` call (the ways Python
code makes the host wait for a device) during 60 steps logged every 30. On CPU these calls cost
little, but the same code runs on a GPU, where each one stalls the queue of kernels.
"""
from __future__ import annotations

import json

import torch

from cselab.config import load_config
from cselab.train.loop import train
from tests.conftest import TINY_BERT

COUNTED = ("item", "__bool__", "__float__", "__int__")


def test_sixty_steps_logged_every_thirty_make_few_host_synchronisations(tmp_path, tiny_corpus, monkeypatch):
    calls = {name: 0 for name in COUNTED}
    for name in COUNTED:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}", "optim.batch_size=8",
                 "optim.max_steps=60", "optim.epochs=2", "train.log_steps=30", "train.eval_steps=0",
                 "train.save_steps=0", "train.precision=fp32", f"train.output_dir={tmp_path / 'run'}"]
    config = load_config("simcse", overrides)
    before = dict(calls)  # building the run (model init, corpus) may read tensors: not counted
    summary = train(config, progress=False)
    during = {name: calls[name] - before[name] for name in COUNTED}
    assert summary["steps"] == 60
    print("host synchronisations during 60 steps:", during)
    assert sum(during.values()) <= 40, during
