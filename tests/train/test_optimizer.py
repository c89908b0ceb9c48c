"""The optimiser follows the field's practice: no weight decay on biases and LayerNorm weights (as BERT
and Hugging Face's Trainer), and transformers' own warm-up schedules."""
from __future__ import annotations

import copy

import pytest
import torch
from transformers import get_linear_schedule_with_warmup

from cselab.config import OptimConfig
from cselab.train.optimizer import make_optimizer


def one_step(encoder, weight_decay: float) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(encoder)
    torch.manual_seed(0)
    optimizer, scheduler = make_optimizer(model, OptimConfig(lr=1e-2, weight_decay=weight_decay), total_steps=10)
    batch = model.tokenizer(["a man plays a guitar", "the cat sleeps"], return_tensors="pt", padding=True)
    model.eval()  # no dropout: both runs see the same gradients
    model(dict(batch)).pow(2).sum().backward()
    optimizer.step()
    scheduler.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def test_weight_decay_spares_biases_and_layernorm_weights(tiny_encoder):
    decayed, plain = one_step(tiny_encoder, 0.5), one_step(tiny_encoder, 0.0)
    layer_norm = {f"{module_name}.{p}" for module_name, m in tiny_encoder.named_modules()
                  if isinstance(m, torch.nn.LayerNorm) for p, _ in m.named_parameters()}
    spared = [n for n in decayed if n.endswith("bias") or n in layer_norm]
    original = dict(tiny_encoder.named_parameters())
    updated = {n for n in plain if not torch.equal(plain[n], original[n])}  # those that had a gradient
    matrices = [n for n in updated if n not in spared and decayed[n].dim() == 2]
    assert spared and matrices and set(spared) & updated
    for name in spared:
        assert torch.equal(decayed[name], plain[name]), name
    assert all(not torch.equal(decayed[n], plain[n]) for n in matrices)


@pytest.mark.parametrize("schedule", ["linear", "constant"])
def test_schedule_is_transformers_own(tiny_encoder, schedule):
    optimizer, scheduler = make_optimizer(tiny_encoder, OptimConfig(lr=1.0, warmup_ratio=0.2, schedule=schedule), 10)
    reference_optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    reference = get_linear_schedule_with_warmup(reference_optimizer, 2, 10)
    seen, expected = [], []
    for _ in range(10):
        seen.append(scheduler.get_last_lr()[0])
        expected.append(reference.get_last_lr()[0] if schedule == "linear" or len(expected) < 2 else 1.0)
        optimizer.step()
        scheduler.step()
        reference_optimizer.step()
        reference.step()
    assert seen == pytest.approx(expected)
    assert seen[0] == 0.0 and seen[1] == pytest.approx(0.5)  # warm-up from 0, as transformers counts it
