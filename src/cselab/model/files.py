"""A saved encoder's files, other than the weights transformers reads and writes itself.

Reading: cselab's own settings (``cselab_config.json``), the pooler and the length a
sentence-transformers directory declares (``modules.json``, ``sentence_bert_config.json``), and the
MLP's weights. Writing, on ``SentenceEncoder.save``: the sentence-transformers modules and config
files, so ``SentenceTransformer(path)`` loads the directory, and cselab's settings. And the loading
policy: a local directory with only pickled weights is refused (:func:`refuse_pickled_weights`).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from torch import nn

from cselab.errors import ModelLoadError, UnsafeModelError, first_line
from cselab.model.poolers import NEEDS_HIDDEN_STATES, POOLERS

log = logging.getLogger(__name__)

CSELAB_CONFIG = "cselab_config.json"
ST_CONFIG = "config_sentence_transformers.json"
# cselab_config.json's "format": 2 = sentence_bert_config.json holds the inference length. Saves without it
# (format 1) stored the training length there, so every reader of the directory cut sentences to it.
SAVE_FORMAT = 2


# -- reading ------------------------------------------------------------------------------------
def read_json(file: Path, kind: type = dict):
    """A model directory's JSON file, which must hold a ``kind`` (dict or list); a ModelLoadError naming
    the file otherwise (a corrupt or hand-edited directory is the user's input, not a bug)."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelLoadError(f"{file}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # invalid JSON or not UTF-8
        raise ModelLoadError(f"{file}: not valid JSON ({first_line(exc, 200)})") from None
    if not isinstance(value, kind):
        raise ModelLoadError(f"{file}: expected a JSON {'object' if kind is dict else 'list'}, "
                             f"got {type(value).__name__}")
    return value


def sentence_transformers_pooler(path: Path) -> str | None:
    """The pooler a sentence-transformers directory declares, in cselab's names."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    for module in read_json(modules_file, list):
        if not isinstance(module, dict) or not isinstance(module.get("type", ""), str) \
                or not isinstance(module.get("path", ""), str):
            raise ModelLoadError(f"{modules_file}: each module must be an object with a string type and path")
        kind = module.get("type", "")
        config_file = path / module.get("path", "") / "config.json"
        if kind.endswith("WeightedLayerPooling") and config_file.is_file():
            layer_start = read_json(config_file).get("layer_start", 0)
            return "avg_first_last" if not isinstance(layer_start, int) or layer_start <= 1 else "avg_top2"
        if kind.endswith("Pooling") and config_file.is_file():
            config = read_json(config_file)
            mode = config.get("pooling_mode") or ("cls" if config.get("pooling_mode_cls_token") else "mean")
            return "cls_before_pooler" if mode == "cls" else "avg"
    return None


def saved_settings(path: Path) -> dict:
    """cselab's own settings of a saved model (``cselab_config.json``), checked; {} when there are none."""
    file = path / CSELAB_CONFIG
    if not file.is_file():
        return {}
    saved = read_json(file)
    expected = {"pooler": (str,), "mlp": (bool,), "mlp_only_train": (bool,), "max_seq_len": (int,), "format": (int,),
                "base_model": (str,), "citations": (list,)}
    for key, types_ in expected.items():
        value = saved.get(key)
        if value is not None and (not isinstance(value, types_) or (key == "max_seq_len" and value < 4)):
            raise ModelLoadError(f"{file}: {key} has an invalid value {value!r}")
    if saved.get("pooler") is not None and saved["pooler"] not in POOLERS:
        raise ModelLoadError(f"{file}: unknown pooler {saved['pooler']!r} (known: {', '.join(POOLERS.names())})")
    return saved


def stored_training_length(path: Path, saved: dict, declared: int | None) -> bool:
    """Whether ``sentence_bert_config.json``'s max_seq_length is the training length, as cselab wrote it
    before save format 2 (recognised by its cselab_config.json: no format, the same max_seq_len)."""
    stored = saved and "format" not in saved and declared is not None and declared == saved.get("max_seq_len")
    if stored:
        log.warning("%s: its max_seq_length %d is the length it was trained at (saved by an earlier cselab); "
                    "encoding reads up to the model's full length (re-save it, cselab.load(path).save(path), so "
                    "sentence-transformers does too)", path, declared)
    return bool(stored)


def declared_length(path: Path) -> int | None:
    """The max_seq_length a sentence-transformers directory declares (None when it declares none)."""
    file = path / "sentence_bert_config.json"
    if not file.is_file():
        return None
    length = read_json(file).get("max_seq_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 4):
        raise ModelLoadError(f"{file}: max_seq_length has an invalid value {length!r}")
    return length


def refuse_pickled_weights(path: Path) -> None:
    """A local model directory must hold safetensors weights: pickled ones can run code when loaded."""
    if not path.is_dir() or any(path.glob("*.safetensors")):
        return
    pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
    if pickled:
        raise UnsafeModelError(
            f"{path}: has only pickled weights ({', '.join(pickled)}); cselab loads safetensors only. If you trust "
            f"the file, convert it once: python -c \"from transformers import AutoModel; "
            f"AutoModel.from_pretrained('{path}').save_pretrained('{path}', safe_serialization=True)\"")


def load_mlp(mlp: nn.Module | None, path: Path) -> None:
    """SimCSE's MLP weights from a saved directory (its sentence-transformers Dense module, or
    cselab's mlp.safetensors when the MLP is used in training only)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    dense_file, mlp_file = path / "2_Dense" / "model.safetensors", path / "mlp.safetensors"
    if mlp is None:
        return
    try:
        if dense_file.is_file():
            weights = load_file(str(dense_file))
            mlp.dense.load_state_dict({"weight": weights["linear.weight"], "bias": weights["linear.bias"]})
        elif mlp_file.is_file():
            mlp.load_state_dict(load_file(str(mlp_file)))
    except (SafetensorError, KeyError, RuntimeError, OSError) as exc:  # corrupt, other keys, other shapes
        first = first_line(exc, 200)
        raise ModelLoadError(f"{path}: cannot load the MLP weights ({first})") from None


# -- writing ------------------------------------------------------------------------------------
# cselab's single-layer poolers as sentence-transformers' Pooling modes (the layer-averaging ones are
# WeightedLayerPooling + mean, in write_sentence_transformers_files()).
ST_POOLING_MODES = {"cls": "cls", "cls_before_pooler": "cls", "avg": "mean"}


def st_modules():
    """sentence-transformers' Dense, Pooling and WeightedLayerPooling classes: 5.4 moved them from
    ``sentence_transformers.models`` (kept there as a deprecated alias) to the path tried first."""
    try:
        from sentence_transformers.sentence_transformer.modules import Dense, Pooling, WeightedLayerPooling
    except ImportError:  # sentence-transformers 3.1 to 5.3
        from sentence_transformers.models import Dense, Pooling, WeightedLayerPooling
    return Dense, Pooling, WeightedLayerPooling


def st_model_config() -> dict:
    """``config_sentence_transformers.json`` with the keys sentence-transformers writes (its ``save``):
    the library versions, no prompts, cosine similarity."""
    import sentence_transformers
    import transformers

    versions = {"sentence_transformers": sentence_transformers.__version__,
                "transformers": transformers.__version__, "pytorch": torch.__version__}
    return {"model_type": "SentenceTransformer", "__version__": versions, "prompts": {},
            "default_prompt_name": None, "similarity_fn_name": "cosine"}


def write_sentence_transformers_files(path: Path, config, pooler: str, dense: nn.Linear | None,
                                      max_seq_length: int) -> None:
    """The modules after the backbone (pooling; ``dense``: SimCSE's MLP layer where it runs at inference),
    ``modules.json``, ``sentence_bert_config.json`` (``max_seq_length``: the length inference reads) and
    ``config_sentence_transformers.json``. ``config``: the backbone's Hugging Face config."""
    Dense, Pooling, WeightedLayerPooling = st_modules()
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    saved_modules = []
    hidden = config.hidden_size
    if pooler in NEEDS_HIDDEN_STATES:
        layers = config.num_hidden_layers
        if pooler == "avg_first_last":
            weights = torch.zeros(layers)
            weights[0] = weights[-1] = 1.0
            saved_modules.append(("WeightedLayerPooling",
                                  WeightedLayerPooling(hidden, layers, 1, nn.Parameter(weights))))
        else:
            saved_modules.append(("WeightedLayerPooling",
                                  WeightedLayerPooling(hidden, layers, layers - 1, nn.Parameter(torch.ones(2)))))
        saved_modules.append(("Pooling", Pooling(hidden, pooling_mode="mean")))
    else:
        mode = ST_POOLING_MODES.get(pooler)
        if mode is None:  # a plug-in pooler: sentence-transformers has no module that pools as it does
            log.warning("%s: pooler %r has no sentence-transformers Pooling mode; SentenceTransformer(path) "
                        "pools with [CLS], cselab.load(path) with %r", path, pooler, pooler)
        saved_modules.append(("Pooling", Pooling(hidden, pooling_mode=mode or "cls")))
    if dense is not None:
        module = Dense(hidden, hidden, activation_function=nn.Tanh())
        module.linear.load_state_dict(dense.state_dict())
        saved_modules.append(("Dense", module))
    for i, (kind, module) in enumerate(saved_modules, start=1):
        sub = f"{i}_{kind}"
        (path / sub).mkdir(exist_ok=True)
        # Pooling has no weights (its save takes no safe_serialization before sentence-transformers 5.0).
        module.save(str(path / sub), **({} if kind == "Pooling" else {"safe_serialization": True}))
        modules.append({"idx": i, "name": str(i), "path": sub, "type": f"sentence_transformers.models.{kind}"})
    (path / "modules.json").write_text(json.dumps(modules, indent=2))
    sbert_config = {"max_seq_length": max_seq_length, "do_lower_case": False}
    (path / "sentence_bert_config.json").write_text(json.dumps(sbert_config, indent=2))
    (path / ST_CONFIG).write_text(json.dumps(st_model_config(), indent=2))


def weight_files(path: Path) -> list[Path]:
    """The safetensors files of a saved model directory: its own and its sentence-transformers modules'
    (``2_Dense/``); not those of a run's checkpoints or best-METRIC/ models."""
    return sorted([*path.glob("*.safetensors"), *path.glob("[0-9]*_*/*.safetensors")])


def save_mlp(mlp: nn.Module, path: Path) -> None:
    """``mlp.safetensors``: SimCSE's MLP when it is used in training only, kept so training can continue
    from the directory (encoding does not use it)."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in mlp.state_dict().items()}, str(path / "mlp.safetensors"))


def write_settings(path: Path, *, pooler: str, mlp: bool, mlp_only_train: bool, max_seq_len: int | None,
                   base_model: str | None, citations: list) -> None:
    """``cselab_config.json``: what sentence-transformers' files do not say (the pooler in cselab's name,
    the MLP, the training length, the base model and the methods' citations, for the card)."""
    settings = {"format": SAVE_FORMAT, "pooler": pooler, "mlp": mlp, "mlp_only_train": mlp_only_train,
                "max_seq_len": max_seq_len, "base_model": base_model, "citations": citations}
    # The Hub repository this directory was pushed to (cselab push) belongs to the directory: kept.
    try:
        hub = json.loads((path / CSELAB_CONFIG).read_text(encoding="utf-8")).get("hub_repo")
    except (OSError, ValueError, AttributeError):  # none yet, or unreadable: nothing to keep
        hub = None
    if isinstance(hub, str):
        settings["hub_repo"] = hub
    (path / CSELAB_CONFIG).write_text(json.dumps(settings, indent=2))
