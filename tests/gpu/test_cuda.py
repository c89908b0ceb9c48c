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
    from tests.recipes.test_recipes import own_model_overrides

    settings = overrides(tiny_corpus, tmp_path / recipe)
    summary = train(load_config(recipe, settings + own_model_overrides(recipe, settings, tmp_path)), progress=False)
    assert summary["finished"] and summary["device"].startswith("cuda")
    assert summary["precision"]["precision"] in ("bf16", "fp16")


def test_precision_auto_is_half_on_the_gpu():
    from cselab.hardware import choose_precision

    choice = choose_precision("auto", torch.device("cuda"))
    # bf16 only with bf16 tensor cores (is_bf16_supported() also counts emulated bf16: V100, T4).
    assert choice.precision == ("bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16")


def test_gpu_encoding_matches_the_cpu(tiny_encoder):
    sentences = ["A man plays a guitar.", "Someone is making music.", "The cat sleeps on the mat."] * 10
    cpu = tiny_encoder.encode(sentences, precision="fp32")
    gpu = tiny_encoder.to("cuda").encode(sentences, precision="auto")
    cosine = (cpu * gpu).sum(1) / np.linalg.norm(cpu, axis=1) / np.linalg.norm(gpu, axis=1)
    assert cosine.min() > 0.999


SYNC_SETTINGS = {"default": [], "unpadded": ["model.unpad=true"], "gradcache": ["optim.grad_cache_chunk=4"],
                 "fp16": ["train.precision=fp16"]}


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_recipe_steps_without_a_host_synchronisation(recipe, tiny_corpus, tmp_path):
    """Inside the steps (forward, backward, update, the metrics' add): CUDA's sync-debug mode raises on
    a synchronising call, and cselab's counter (train/host_syncs.py) counts the ops that would wait
    (nonzero, item, boolean masks, copies to the host, tensors from host data)."""
    from cselab.train.loop import train
    from tests.recipes.test_recipes import with_tiny_caches
    from tests.train.sync_steps import counting_steps, describe

    config = with_tiny_caches(recipe, overrides(tiny_corpus, tmp_path / "run", steps=20) + ["train.log_steps=10"],
                              tiny_corpus, tmp_path)
    with counting_steps(cuda_sync_debug=True) as counter:
        summary = train(config, progress=False)
    assert summary["steps"] == 20
    assert counter.total == 0, describe(counter)


@pytest.mark.parametrize("setting", sorted(SYNC_SETTINGS))
def test_focal_steps_without_a_host_synchronisation_on_each_path(setting, tiny_corpus, tmp_path):
    from cselab.train.loop import train
    from tests.train.sync_steps import counting_steps, describe

    config = load_config("focal", overrides(tiny_corpus, tmp_path / "run", steps=20) + ["train.log_steps=10",
                                                                                       *SYNC_SETTINGS[setting]])
    with counting_steps(cuda_sync_debug=True) as counter:
        train(config, progress=False)
    assert counter.total == 0, describe(counter)
