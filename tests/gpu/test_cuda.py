"""On a CUDA GPU: every shipped recipe trains, precision auto picks half precision, encoding matches
the CPU, and a step makes no host synchronisation. Skipped (with the reason) where there is no GPU."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cselab.config import list_recipes, load_config
from tests.conftest import TINY_BERT

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible to PyTorch)")]


def overrides(corpus, out, steps=3):
    return [f"model.from_config={json.dumps(TINY_BERT)}", "model.name_or_path=minilm", f"data.corpus={corpus}",
            "optim.batch_size=8", f"optim.max_steps={steps}", "train.eval_steps=0", "train.save_steps=0",
            f"train.output_dir={out}", "train.device=cuda"]


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_recipe_trains_three_steps_on_the_gpu(recipe, tiny_corpus, tmp_path):
    from cselab.train.loop import train

    summary = train(load_config(recipe, overrides(tiny_corpus, tmp_path / recipe)), progress=False)
    assert summary["finished"] and summary["device"].startswith("cuda")
    assert summary["precision"]["precision"] in ("bf16", "fp16")


def test_precision_auto_is_half_on_the_gpu():
    from cselab.hardware import choose_precision

    choice = choose_precision("auto", torch.device("cuda"))
    assert choice.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")


def test_gpu_encoding_matches_the_cpu(tiny_encoder):
    sentences = ["A man plays a guitar.", "Someone is making music.", "The cat sleeps on the mat."] * 10
    cpu = tiny_encoder.encode(sentences, precision="fp32")
    gpu = tiny_encoder.to("cuda").encode(sentences, precision="auto")
    cosine = (cpu * gpu).sum(1) / np.linalg.norm(cpu, axis=1) / np.linalg.norm(gpu, axis=1)
    assert cosine.min() > 0.999


def test_training_steps_make_no_host_synchronisation(tiny_corpus, tmp_path, monkeypatch):
    from cselab.train.loop import train

    calls = []
    for name in ("item", "__bool__", "__float__", "__int__"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            if self.is_cuda:
                calls.append(None)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    config = load_config("simcse", overrides(tiny_corpus, tmp_path / "run", steps=30) + ["train.log_steps=30"])
    train(config, progress=False)
    assert len(calls) <= 5
