"""Validation MLM loss and accuracy on the lines held out of training (``data.validation_fraction``).

The held-out lines are tokenised (packed into blocks when training is) and masked once, with
seeds of their own, so every evaluation of a run, and of any other run on the same corpus,
scores the same masked tokens: the numbers compare. Loss and accuracy are means over all masked
tokens (not over batches), read back from the device once per evaluation. At most
:data:`VALIDATION_ROWS` sentences or blocks are scored, so an evaluation stays short on any corpus.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from cselab.data.collate import Batch
from cselab.data.seeds import Stream, step_seed
from cselab.losses.base import LossInputs, TokenBatch
from cselab.train.steps import StepForward

VALIDATION_ROWS = 2048  # held-out sentences (or packed blocks) scored at each evaluation, at most
VALIDATION_SEED = 0  # masks of the held-out rows: the same for every run, whatever its train.seed


def validation_batches(collator, rows: Sequence, batch_size: int) -> list[TokenBatch]:
    """The held-out rows (sentences, or packed blocks), masked in batches by the training collator's
    rules; each batch has a fixed seed."""
    rows = [rows[i] for i in range(min(len(rows), VALIDATION_ROWS))]
    return [collator.token_batch("masked", rows[start:start + batch_size],
                                 step_seed(VALIDATION_SEED, k, Stream.FIRST_TOKEN_PASS))
            for k, start in enumerate(range(0, len(rows), batch_size))]


class ValidationMlm:
    """The MLM term's loss and accuracy on the validation batches, with the training step's MLM pass."""

    def __init__(self, batches: list[TokenBatch], forward: StepForward):
        self.batches, self.forward = batches, forward
        self.term = forward.objective.readers("masked")[0]
        self.tokens = sum(len(batch.labels) for batch in batches)

    @torch.no_grad()
    def __call__(self) -> dict[str, float]:
        modules = (self.forward.encoder, self.term)
        modes = [module.training for module in modules]
        for module in modules:
            module.eval()  # no dropout: the same weights always score the same
        totals = None
        for masked in self.batches:
            outputs = self.forward.token_outputs(Batch(step=-1, num_sentences=0, tokens={"masked": masked}),
                                                 LossInputs())
            loss, logs = self.term(LossInputs().with_tokens(outputs))
            weighted = torch.stack([loss.float(), logs["acc"].float()]) * len(masked.labels)
            totals = weighted if totals is None else totals + weighted
        for module, mode in zip(modules, modes, strict=True):
            module.train(mode)
        loss_sum, correct = totals.tolist() if totals is not None else (0.0, 0.0)
        count = max(self.tokens, 1)
        return {"val_mlm_loss": loss_sum / count, "val_mlm_acc": correct / count}


def validation_for(batches: list[TokenBatch], forward: StepForward, main: bool) -> ValidationMlm | None:
    """The main process's validation (it alone evaluates), when the run holds lines out and has an
    MLM term."""
    if not main or not batches or not forward.objective.readers("masked"):
        return None
    return ValidationMlm(batches, forward)
