"""Model selection: an evaluation every ``eval_steps`` (and at the last step), and the best model
kept in the output directory.

SimCSE's rule: evaluate during training, keep only the best checkpoint's weights as the final
model; the evaluation is STS-B dev Spearman (higher is better). A run with a validation split
(``data.validation_fraction``) also measures the MLM loss and accuracy on the held-out lines
(``train/validation.py``); for an objective of MLM alone (pre-training) that loss picks the best
model (lower is better), since STS-B dev says little about a raw encoder. The best model's marker
file (``best_model.json``) is written after its files, so a save cut short by a crash is recognised
and repaired on resume (:meth:`BestModel.reconcile`).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from cselab.evaluate.dev import StsbDev
from cselab.model.encoder import CSELAB_CONFIG, SentenceEncoder
from cselab.train.checkpoint import write_json_atomic
from cselab.train.validation import ValidationMlm

log = logging.getLogger(__name__)

BEST_MODEL = "best_model.json"  # written after the best model's files: absent = that save was cut short
LOWER_IS_BETTER = {"stsb_dev": False, "val_mlm_loss": True}  # the metrics that can pick the best model


class BestModel:
    """Evaluates the encoder and saves it to ``out_dir`` when it is the best so far.

    ``metric`` names the evaluation that decides; ``best_dev`` is its best value so far (the
    checkpoint keeps it under that name, whichever metric it is) and ``best_step`` the step of it.
    """

    def __init__(self, out_dir: Path, dev: StsbDev | None, encoder: SentenceEncoder, precision: str, every: int):
        self.out_dir, self.dev, self.encoder = out_dir, dev, encoder
        self.precision, self.every = precision, every
        self.best_dev: float | None = None
        self.best_step: int | None = None
        self.metric = "stsb_dev"
        self.validation: ValidationMlm | None = None
        self.raw_encoder = False

    def attach(self, validation: ValidationMlm | None, mlm_only: bool) -> None:
        """Validation MLM loss at every evaluation. An MLM-only objective trains no pooled output: its
        validation loss picks the best model, and the model is saved as a raw encoder (below)."""
        self.validation, self.raw_encoder = validation, mlm_only
        if mlm_only and validation is not None:
            self.metric = "val_mlm_loss"

    @property
    def selects(self) -> bool:
        """Whether evaluations pick the final model (else it is the last step's)."""
        source = self.dev if self.metric == "stsb_dev" else self.validation
        return self.every > 0 and source is not None

    def due(self, step: int, last: bool) -> bool:
        evaluates = self.dev is not None or self.validation is not None
        return self.every > 0 and evaluates and (step % self.every == 0 or last)

    def score(self) -> float:
        """STS-B dev Spearman x 100 of the encoder now (in the training precision)."""
        return self.dev.score(lambda s: self.encoder.encode(s, batch_size=128, precision=self.precision))

    def evaluate(self, step: int) -> dict[str, float]:
        """Every evaluation of the encoder now, by name; saved as the final model if it is the best."""
        scores = {}
        if self.dev is not None:
            scores["stsb_dev"] = self.score()
        if self.validation is not None:
            scores.update(self.validation())
        value = scores.get(self.metric)
        if value is not None and self.is_better(value):
            self.best_dev, self.best_step = value, step
            self.save(step, value)
        return scores

    def is_better(self, value: float) -> bool:
        if self.best_dev is None:
            return True
        return value < self.best_dev if LOWER_IS_BETTER[self.metric] else value > self.best_dev

    def write_model(self) -> None:
        """The encoder as the run's final model. A raw encoder's settings leave out the MLP choice, so
        a run started from it gets SimCSE's default, as from any raw BERT (cls pooler: with the MLP)."""
        self.encoder.save(self.out_dir)
        if self.raw_encoder:
            settings_file = self.out_dir / CSELAB_CONFIG
            settings = json.loads(settings_file.read_text())
            settings = {k: v for k, v in settings.items() if k not in ("mlp", "mlp_only_train")}
            settings_file.write_text(json.dumps({**settings, "raw_encoder": True}, indent=2))

    def save(self, step: int, score: float) -> None:
        (self.out_dir / BEST_MODEL).unlink(missing_ok=True)
        self.write_model()
        write_json_atomic(self.out_dir / BEST_MODEL, {"step": step, self.metric: score})

    def summary(self) -> dict:
        """The run summary's account of the selection."""
        return {"selected_by": self.metric if self.selects else "last_step",
                "best_stsb_dev": self.best_dev if self.metric == "stsb_dev" else None,
                "best_val_mlm_loss": self.best_dev if self.metric == "val_mlm_loss" else None,
                "best_step": self.best_step}

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
            self.best_dev = next(marker[name] for name in LOWER_IS_BETTER if name in marker)
            self.best_step = marker["step"]
        elif self.best_step == resumed_step:
            self.save(self.best_step, self.best_dev)
        else:
            log.warning("the best model in %s was being written when the run stopped; the replayed steps rewrite "
                        "it (exactly so only when training is deterministic, e.g. fp32 on CPU)", self.out_dir)
