"""The names of what a training run writes into its output directory (and `cselab sweep` beside it),
declared once: the training loop writes them; the model card, `cselab push`, `cselab eval`, the sweeps
and reports, and the check of a path that is no model (sources.py) read them."""
from __future__ import annotations

RUN_CONFIG = "train_config.json"  # the resolved recipe (config.json is the saved model's own)
METRICS = "metrics.jsonl"  # a record per log window and evaluation
SUMMARY = "summary.json"  # the run's summary (train/summary.py)
BEST_MODEL = "best_model.json"  # written after the best model's files: absent = that save was cut short
KEPT_DIR = "best-{metric}"  # a further metric's best model: OUTPUT_DIR/best-transfer_dev/
CHECKPOINTS = "checkpoints"  # the folder of the run's checkpoints
LOCK = ".cselab-train.lock"  # held while a run writes the directory
VERSIONS = "versions.json"  # the libraries that trained and evaluated the run (`cselab sweep`)
EVAL_FILE = "eval-{split}.json"  # the evaluation of the run's model on a split (`cselab sweep`)
SWEEP_FILE = "sweep.json"  # `cselab sweep`'s aggregate, in the folder that holds its runs
