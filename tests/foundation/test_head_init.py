"""The heads start as the papers' code starts them (issue 38): SimCSE's MLP and DiffCSE's projector as
BERT initialises its layers (SimCSE's cl_init: normal(0, initializer_range) weights, zero biases);
AugCSE's recipes keep torch's defaults, as its code builds plain modules; a saved MLP still loads."""
from __future__ import annotations

import json

import pytest
import torch

from cselab.config import load_config
from cselab.train.setup import build_setup
from tests.conftest import TINY_BERT

SETTINGS = [f"model.from_config={json.dumps({**TINY_BERT, 'hidden_size': 256, 'num_attention_heads': 4})}",
            "model.name_or_path=minilm", "train.eval_steps=0"]


def linears(module: torch.nn.Module) -> list[torch.nn.Linear]:
    return [layer for layer in module.modules() if isinstance(layer, torch.nn.Linear)]


def test_simcse_mlp_starts_with_zero_bias_and_weights_of_std_initializer_range(tiny_corpus):
    parts = build_setup(load_config("simcse", [*SETTINGS, f"data.corpus={tiny_corpus}"]), torch.device("cpu"))
    dense = parts.encoder.mlp.dense
    std = parts.encoder.backbone.config.initializer_range
    assert torch.equal(dense.bias, torch.zeros_like(dense.bias))
    assert float(dense.weight.detach().std()) == pytest.approx(std, rel=0.05)  # 65,536 draws: within 5%
    assert float(dense.weight.detach().mean()) == pytest.approx(0.0, abs=std / 50)


@pytest.mark.parametrize(("recipe", "bert_like"), [("clear-del-word", True), ("augcse-4", False)])
def test_projection_heads_start_as_their_papers_code_starts_them(recipe, bert_like, tiny_corpus):
    parts = build_setup(load_config(recipe, [*SETTINGS, f"data.corpus={tiny_corpus}"]), torch.device("cpu"))
    std = parts.encoder.backbone.config.initializer_range
    for layer in linears(parts.head):
        spread = float(layer.weight.detach().std())
        if bert_like:
            assert spread == pytest.approx(std, rel=0.1)
            assert layer.bias is None or not layer.bias.any()
        else:  # torch's kaiming-uniform: std = 1 / sqrt(3 * fan_in), far from 0.02 at fan_in 256 or 512
            assert spread == pytest.approx(1 / (3 * layer.in_features) ** 0.5, rel=0.1)


def test_head_init_pytorch_keeps_torch_defaults_and_a_saved_mlp_loads_over_either(tiny_corpus, tmp_path):
    parts = build_setup(load_config("simcse", [*SETTINGS, f"data.corpus={tiny_corpus}", "model.head_init=pytorch",
                                               "model.mlp_only_train=false"]), torch.device("cpu"))
    dense = parts.encoder.mlp.dense
    assert dense.bias.abs().sum() > 0
    assert float(dense.weight.detach().std()) == pytest.approx(1 / (3 * 256) ** 0.5, rel=0.1)
    parts.encoder.save(tmp_path / "saved")
    again = build_setup(load_config("simcse", [f"model.name_or_path={tmp_path / 'saved'}", "train.eval_steps=0",
                                               f"data.corpus={tiny_corpus}", "model.mlp_only_train=false"]),
                        torch.device("cpu"))
    assert torch.equal(again.encoder.mlp.dense.weight, dense.weight)
