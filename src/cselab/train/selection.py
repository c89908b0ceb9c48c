"""Model selection: STS-B dev every ``eval_steps``, and the best model kept in the output directory.

SimCSE's rule: evaluate during training, keep only the best checkpoint's weights as the final
model. The best model's marker file (``best_model.json``) is written after its files, so a save cut
short by a crash is recognised and repaired on resume (:meth:`BestModel.reconcile`).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from cselab.evaluate.dev import StsbDev
from cselab.model.encoder import SentenceEncoder
from cselab.train.checkpoint import write_json_atomic

log = logging.getLogger(__name__)

BEST_MODEL = "best_model.json"  # written after the best model's files: absent = that save was cut short


class BestModel:
    """Evaluates the encoder on STS-B dev and saves it to ``out_dir`` when it is the best so far."""

    def __init__(self, out_dir: Path, dev: StsbDev | None, encoder: SentenceEncoder, precision: str, every: int):
        self.out_dir, self.dev, self.encoder = out_dir, dev, encoder
        self.precision, self.every = precision, every
        self.best_dev: float | None = None
        self.best_step: int | None = None

    def due(self, step: int, last: bool) -> bool:
        return self.dev is not None and (step % self.every == 0 or last)

    def score(self) -> float:
        """STS-B dev Spearman x 100 of the encoder now (in the training precision)."""
        return self.dev.score(lambda s: self.encoder.encode(s, batch_size=128, precision=self.precision))

    def evaluate(self, step: int) -> float:
        """STS-B dev Spearman x 100 of the encoder now; saved as the final model if it is the best."""
        score = self.score()
        if self.best_dev is None or score > self.best_dev:
            self.best_dev, self.best_step = score, step
            self.save(step, score)
        return score

    def save(self, step: int, score: float) -> None:
        (self.out_dir / BEST_MODEL).unlink(missing_ok=True)
        self.encoder.save(self.out_dir)
        write_json_atomic(self.out_dir / BEST_MODEL, {"step": step, "stsb_dev": score})

    def reconcile(self, resumed_step: int) -> None:
        """Make this record and the best model on disk agree after resuming from ``resumed_step``.

        A best model saved after the checkpoint (and completely written) is kept and adopted; one
        whose save was cut short is rewritten from the checkpoint's weights when they are that model.
        """
        if self.best_step is None and not (self.out_dir / BEST_MODEL).is_file():
            return
        try:
            marker = json.loads((self.out_dir / BEST_MODEL).read_text())
        except (OSError, ValueError):
            marker = None
        if marker is not None and self.best_step is not None and marker["step"] == self.best_step:
            return
        if marker is not None and marker["step"] > resumed_step:
            self.best_dev, self.best_step = marker["stsb_dev"], marker["step"]
        elif self.best_step == resumed_step:
            self.save(self.best_step, self.best_dev)
        else:
            log.warning("the best model in %s was being written when the run stopped; the replayed steps rewrite "
                        "it (exactly so only when training is deterministic, e.g. fp32 on CPU)", self.out_dir)
