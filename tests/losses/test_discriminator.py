"""AugCSE's discriminator: gradient reversal signs, learnability, sizes, clear errors."""
from __future__ import annotations

import pytest
import torch

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs
from cselab.losses.discriminator import reverse_gradient


def test_gradient_reversal_negates_and_scales():
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(3, 4)
    (reverse_gradient(x, 0.7) * w).sum().backward()
    assert torch.allclose(x.grad, -0.7 * w)
    assert torch.equal(reverse_gradient(x, 0.7), x)


def outputs_for(anchor, label_view, labels):
    return LossInputs(anchor=anchor, positive=anchor, label_view=label_view, labels=labels)


def test_discriminator_descends_while_encoder_side_gets_reversed_gradient():
    torch.manual_seed(0)
    term = LOSSES.build("discriminator", num_labels=3, embedding_size=8, alpha=0.5, dropout=0.0)
    anchor = torch.randn(16, 8, requires_grad=True)
    view = torch.randn(16, 8)
    labels = torch.randint(0, 3, (16,))
    # The true gradient of the discriminator loss w.r.t. the embeddings: alpha = -1 makes the layer + identity.
    term.alpha = -1.0
    loss, _ = term(outputs_for(anchor, view, labels))
    (true_grad,) = torch.autograd.grad(loss, anchor)
    term.alpha = 0.5
    loss, _ = term(outputs_for(anchor, view, labels))
    loss.backward()
    assert torch.allclose(anchor.grad, -0.5 * true_grad, atol=1e-7)
    assert true_grad.abs().sum() > 0
    # A small step of the discriminator's own parameters along -grad lowers its loss ...
    with torch.no_grad():
        for p in term.parameters():
            p -= 0.05 * p.grad
        after_disc, _ = term(outputs_for(anchor, view, labels))
    assert after_disc < loss
    # ... while the encoder side, stepping along -(its reversed gradient), raises it.
    with torch.no_grad():
        moved = anchor - 0.5 * anchor.grad
        after_encoder, _ = term(outputs_for(moved, view, labels))
    assert after_encoder > after_disc


def synthetic(n: int, k: int, d: int, generator: torch.Generator):
    offsets = torch.randn(k, d, generator=torch.Generator().manual_seed(123)) * 2
    original = torch.randn(n, d, generator=generator)
    labels = torch.randint(0, k, (n,), generator=generator)
    augmented = original + offsets[labels] + 0.3 * torch.randn(n, d, generator=generator)
    return original, augmented, labels


def test_discriminator_learns_separable_augmentation_types():
    torch.manual_seed(0)
    k, d = 5, 16
    term = LOSSES.build("discriminator", num_labels=k, embedding_size=d)
    optimizer = torch.optim.Adam(term.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        original, augmented, labels = synthetic(64, k, d, generator)
        loss, _ = term(outputs_for(original, augmented, labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    term.eval()
    original, augmented, labels = synthetic(512, k, d, generator)
    _, logs = term(outputs_for(original, augmented, labels))
    assert logs["acc"] > 0.9


def test_layers_have_the_papers_sizes_and_are_optimised():
    term = LOSSES.build("discriminator", num_labels=4, embedding_size=10, dropout=0.0)
    assert term.hidden.weight.shape == (40, 20) and term.output.weight.shape == (4, 40)
    optimizer = torch.optim.AdamW(term.parameters(), lr=0.01)
    loss, _ = term(outputs_for(torch.randn(6, 10), torch.randn(6, 10), torch.tensor([0, 1, 2, 3, 0, 1])))
    before = term.hidden.weight.detach().clone()
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, term.hidden.weight)


def test_bad_settings_have_clear_errors():
    term = LOSSES.build("discriminator", num_labels=3, embedding_size=4)
    with pytest.raises(RuntimeError, match="out of bounds"):  # a label >= num_labels
        term(outputs_for(torch.randn(2, 4), torch.randn(2, 4), torch.tensor([0, 3])))
    with pytest.raises(ValueError, match="views.label"):
        term(LossInputs(torch.randn(2, 4), torch.randn(2, 4)))
    with pytest.raises(ValueError, match="num_labels"):
        LOSSES.build("discriminator", num_labels=1)
    with pytest.raises(ValueError, match="embedding_size"):  # sizes are filled by the training loop
        LOSSES.build("discriminator", num_labels=3)(outputs_for(torch.randn(2, 4), torch.randn(2, 4),
                                                                torch.tensor([0, 1])))
