"""A before/after signal that needs no dev data: alignment and uniformity (Wang & Isola, 2020;
``evaluate/alignment.py``) of the starting and the trained encoder on corpus lines.

Alignment is measured on two dropout views of each line (the positives unsupervised SimCSE trains
on), uniformity on the lines' inference embeddings; lower is better for both. The lines are ones
the run does not train on where there are such (those ``data.max_sentences`` leaves out, as the
default corpus's sample does), else a seeded sample of the training lines (said so). Measured on
the main process in fp32, outside the training's random stream, on ``train.geometry_lines`` lines
(0 turns it off).
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from cselab.config import Config
from cselab.data.indexed import left_out_lines
from cselab.evaluate.alignment import alignment, uniformity
from cselab.model.encoder import SentenceEncoder

BATCH = 128
HELD_OUT = "held-out lines (left out by data.max_sentences)"
TRAINING = "training lines (the whole corpus is trained on)"


def probe_lines(config: Config, corpus: Sequence[str]) -> tuple[list[str], str]:
    """The lines to measure on and what they are; none when ``train.geometry_lines`` is 0."""
    count = config.train.geometry_lines
    if count <= 0 or config.data.packing:  # packed token blocks pre-train a raw encoder: no sentences to compare
        return [], ""
    lines = left_out_lines(config.data.corpus, config.data.column, config.data.max_sentences, config.train.seed,
                           count)
    if len(lines) >= 2:
        return lines, HELD_OUT
    rows = sorted(random.Random(config.train.seed).sample(range(len(corpus)), min(count, len(corpus))))
    return [corpus[i] for i in rows], TRAINING


def measure(encoder: SentenceEncoder, lines: list[str]) -> dict[str, float]:
    """Alignment of two dropout views of each line and uniformity of the lines' embeddings."""
    lines = sorted(lines, key=len)  # batches of similar lengths: little padding (the pairs stay pairs)
    device = encoder.device
    # The training's random stream is left as it was: a run measures the same steps as one that does not.
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        views = _dropout_views(encoder, lines)
    embeddings = encoder.encode(lines, batch_size=BATCH, precision="fp32")
    return {"alignment": alignment(*views), "uniformity": uniformity(embeddings)}


def _dropout_views(encoder: SentenceEncoder, lines: list[str]):
    """Each line encoded twice with dropout on, pooled as for inference (SimCSE's MLP only where it stays)."""
    was_training = encoder.training
    use_mlp = encoder.mlp is not None and not encoder.mlp_only_train
    first, second = [], []
    encoder.train()
    try:
        with torch.no_grad():
            for start in range(0, len(lines), BATCH):
                features = {k: v.to(encoder.device) for k, v in encoder.tokenize(lines[start:start + BATCH]).items()}
                first.append(encoder(features, use_mlp=use_mlp).float().cpu())
                second.append(encoder(features, use_mlp=use_mlp).float().cpu())
    finally:
        encoder.train(was_training)
    return torch.cat(first).numpy(), torch.cat(second).numpy()


class GeometryProbe:
    """The encoder's alignment and uniformity on the probe lines: the starting model's figures are
    measured before step 1 and kept in checkpoints (its state), so a resumed run still compares."""

    def __init__(self, config: Config, encoder: SentenceEncoder, corpus: Sequence[str]):
        self.config, self.encoder, self.corpus = config, encoder, corpus
        self.base: dict = {}
        self._lines: tuple[list[str], str] | None = None

    def lines(self) -> tuple[list[str], str]:
        """The probe lines and where they come from, read once (a fresh run measures them twice)."""
        if self._lines is None:
            self._lines = probe_lines(self.config, self.corpus)
        return self._lines

    def measure_base(self) -> None:
        lines, source = self.lines()
        self.base = {"lines": len(lines), "source": source, **measure(self.encoder, lines)} if len(lines) > 1 else {}

    def summary(self) -> dict | None:
        """Base and trained figures side by side for summary.json; None when the base was not measured."""
        if not self.base:
            return None
        lines, source = self.lines()
        return {"lines": self.base["lines"], "source": source,
                "base": {k: self.base[k] for k in ("alignment", "uniformity")}, "trained": measure(self.encoder, lines)}

    def state_dict(self) -> dict:
        return {"base": self.base}

    def load_state_dict(self, state: dict) -> None:
        self.base = state["base"]
