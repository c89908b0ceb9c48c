"""A training step never makes the host wait for the device: values are read once per log window.

``cselab.train.host_syncs.HostSyncCounter`` records every op that would make the host wait on a GPU
(``nonzero``, ``item``, boolean-mask indexing, copies to the host, tensors made from host data, ...)
while a step runs; every shipped recipe trains 3 steps on a tiny model and the count is zero.
On CPU these ops cost little, but the same code runs on a GPU, where each one stalls the queue of
kernels. The counter's own tests show it catches each kind.
"""
from __future__ import annotations

import pytest
import torch

from cselab.config import list_recipes
from cselab.train.host_syncs import HostSyncCounter
from tests.recipes.test_recipes import tiny_overrides, with_tiny_caches
from tests.train.sync_steps import counting_steps, describe


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_recipe_trains_without_a_host_sync_inside_its_steps(recipe, tiny_corpus, tmp_path):
    overrides = [*tiny_overrides(tiny_corpus, tmp_path / "run"), "optim.max_steps=3", "train.log_steps=2"]
    config = with_tiny_caches(recipe, overrides, tiny_corpus, tmp_path)
    from cselab.train.loop import train

    with counting_steps() as counter:
        summary = train(config, progress=False)
    assert summary["steps"] == 3
    assert counter.total == 0, describe(counter)


# The padded forward with the fast-dropout attention, with transformers' SDPA attention (a GPU's
# path: its mask is built without transformers' padding_mask.all()), and GradCache's chunks.
SETTINGS = {"padded": ["model.unpad=false"], "padded_sdpa": ["model.unpad=false", "train.fast_cpu=false"],
            "gradcache": ["optim.grad_cache_chunk=4"]}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_the_padded_forward_and_gradcache_make_no_host_sync_either(setting, tiny_corpus, tmp_path):
    overrides = [*tiny_overrides(tiny_corpus, tmp_path / "run"), "optim.max_steps=3", *SETTINGS[setting]]
    from cselab.config import load_config
    from cselab.train.loop import train

    with counting_steps() as counter:
        train(load_config("focal", overrides), progress=False)
    assert counter.total == 0, describe(counter)


def _count(function) -> HostSyncCounter:
    counter = HostSyncCounter()
    with counter:
        function()
    return counter


@pytest.mark.parametrize("name, function", [
    ("nonzero", lambda x: x.nonzero()),
    ("_local_scalar_dense", lambda x: x.sum().item()),
    ("_local_scalar_dense", lambda x: float(x[0])),
    ("_local_scalar_dense", lambda x: bool(x[0] > 0)),
    ("masked_select", lambda x: x.masked_select(x > 0)),
    ("boolean-mask indexing", lambda x: x[x > 0]),
    ("tensor from host data", lambda x: x.new_tensor(0.5)),
    ("host read (numpy)", lambda x: (x * 2).numpy()),
    ("host read (tolist)", lambda x: (x * 2).tolist()),
])
def test_the_counter_catches_each_kind_of_host_sync(name, function):
    x = torch.randn(6)
    counter = _count(lambda: function(x))
    assert counter.counts[name] >= 1, dict(counter.counts)


def test_the_counter_ignores_device_side_work_and_reads_of_host_data():
    x, host = torch.randn(6, requires_grad=True), torch.ones(6)
    counter = _count(lambda: ((x * 2).clamp(min=0).sum() + x.new_full((), 0.5)).backward() or host.numpy())
    assert counter.total == 0, dict(counter.counts)
    paused = HostSyncCounter()
    with paused, paused.pause():
        x.sum().item()
    assert paused.total == 0


@pytest.mark.parametrize("model_type", ["bert", "roberta", "mpnet", "distilbert"])
def test_a_padded_forward_builds_its_attention_mask_without_a_host_sync(model_type):
    """transformers asks padding_mask.all() before building a mask (to skip it without padding);
    cselab's encoders build it always, with the same values as the model's own."""
    from cselab.model.encoder import SentenceEncoder
    from tests.conftest import TINY_BERT

    size = {k: v for k, v in TINY_BERT.items() if k != "model_type"}
    if model_type == "distilbert":
        size = {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "max_position_embeddings": 64}
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config({"model_type": model_type, **size}, "minilm").eval()
    features = encoder.tokenize(["a cat", "a much longer sentence than the first one"])
    with HostSyncCounter() as counter:
        vectors = encoder(features)
    assert counter.total == 0, describe(counter)
    encoder.backbone.config._attn_implementation = "eager"  # transformers' own mask, asked first
    assert torch.allclose(vectors, encoder(features), atol=1e-5)
