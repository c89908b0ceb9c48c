"""The sentence encoder: a Hugging Face backbone, a pooler and SimCSE's optional MLP.

The whole forward pass reads top to bottom in ``SentenceEncoder.forward``. A saved encoder is a
sentence-transformers directory (safetensors only), so ``SentenceTransformer(path)`` loads it and
gives the same embeddings as ``SentenceEncoder.encode``: its ``max_seq_length`` is the backbone's
usable length (not the training length, which ``cselab_config.json`` keeps), with
``config_sentence_transformers.json`` and a model card (``model/card.py``) beside it. Those files
other than the weights are read and written by ``model/files.py``.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from cselab import citations
from cselab.errors import ModelLoadError, first_line
from cselab.file_writes import follow_umask
from cselab.hardware import autocast, choose_precision
from cselab.model.files import (
    declared_length,
    load_mlp,
    refuse_pickled_weights,
    save_mlp,
    saved_settings,
    sentence_transformers_pooler,
    stored_training_length,
    weight_files,
    write_sentence_transformers_files,
    write_settings,
)
from cselab.model.heads import init_like_backbone
from cselab.model.masks import use_sync_free_masks
from cselab.model.poolers import NEEDS_HIDDEN_STATES, POOLERS
from cselab.sources import check_model_source, resolve_model_path

if TYPE_CHECKING:  # speed/ imports torch's compiler: loaded only where the unpadded forward runs
    from cselab.speed.unpadded import CompiledRows

log = logging.getLogger(__name__)

# The longest input used for inference: BERT-size encoders have 512 positions, and attention's cost grows
# with the square of the length beyond them for models with no fixed limit.
FULL_LENGTH_CAP = 512


# Models whose Hugging Face class has BERT's pooler (dense + tanh over [CLS]): cselab pools itself.
BERT_LIKE = ("bert", "roberta", "xlm-roberta", "camembert")


def position_limit(backbone: nn.Module) -> int | None:
    """How many tokens the backbone's position embeddings allow (None: no fixed limit)."""
    config = backbone.config
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, bool) or not isinstance(positions, int) or positions <= 0:
        return None
    if config.model_type in ("roberta", "xlm-roberta", "camembert"):
        positions -= (config.pad_token_id or 1) + 1  # RoBERTa numbers positions from padding_idx + 1
    return positions


ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # the tokenizer's outputs a backbone reads


def usable_length(backbone: nn.Module, tokenizer) -> int:
    """The longest input the model reads for inference: its position limit and its tokenizer's limit,
    at most ``FULL_LENGTH_CAP`` (sentence-transformers caps a plain model's length the same way)."""
    limits = [FULL_LENGTH_CAP, position_limit(backbone) or FULL_LENGTH_CAP]
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and not isinstance(tokenizer_limit, bool) and tokenizer_limit >= 4:
        limits.append(tokenizer_limit)
    return min(limits)


def special_frame(tokenizer) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after a text (BERT: [CLS], [SEP]), found by
    tokenising one word with and without them."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    framed = tokenizer("a")["input_ids"]
    at = next(i for i in range(len(framed) - len(bare) + 1) if framed[i:i + len(bare)] == bare)
    return framed[:at], framed[at + len(bare):]


class SimCSEMLP(nn.Module):
    """SimCSE's projection over the pooled output: Linear(h, h) then tanh."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class SentenceEncoder(nn.Module):
    """Backbone + pooler (+ SimCSE MLP). ``forward`` takes tokenised features, returns vectors."""

    def __init__(self, backbone: nn.Module, tokenizer, pooler: str = "cls", mlp: bool | None = None,
                 mlp_only_train: bool = True, max_seq_len: int = 32, head_init: str = "bert"):
        super().__init__()
        POOLERS.get(pooler)  # fail early on an unknown name
        use_sync_free_masks(backbone)  # no read-back of the batch per forward (model/masks.py)
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooler = pooler
        self.pool = POOLERS.get(pooler)
        self.max_seq_len = _fitting_length(max_seq_len, backbone)
        # The length it is trained at: cselab_config.json keeps it (None: not known, e.g. a model loaded
        # for inference that cselab did not train); tokenize() cuts at max_seq_len.
        self.train_max_seq_len: int | None = self.max_seq_len
        self.base_model: str | None = None  # the model it starts from (None: randomly initialised); for the card
        self.citation = ""  # the BibTeX of the methods it is trained with (the training run sets it); for the card
        self.mlp_only_train = mlp_only_train
        use_mlp = (pooler == "cls") if mlp is None else mlp
        self.mlp = SimCSEMLP(backbone.config.hidden_size) if use_mlp else None
        if self.mlp is not None and head_init == "bert":  # as SimCSE's cl_init; a saved MLP's weights load over it
            init_like_backbone(self.mlp, backbone)
        self.unpadded = False  # a speed setting of the training loop, not saved: see use_unpadded()
        # The unpadded layers compiled (speed/compiled.py), used in training; set by train.compile.
        self.compiled_layers = None  # see compiles()
        self.base_pooler: dict[str, torch.Tensor] | None = None  # see _pooler_state (a plain dict: not trained)
        # The backbone's own MLM head (model/mlm_head.py), set by training when an MLM term needs it; saved beside.
        self.mlm_head: nn.Module | None = None

    def compiles(self, real_tokens: int | None) -> bool:
        """Whether this forward runs the compiled layers: a training step's (in training mode, with the
        token count its batch counted on the host), not an evaluation's, nor the geometry probe's
        dropout views (train/geometry.py), whose shapes would only add compilations."""
        return self.compiled_layers is not None and self.training and real_tokens is not None

    def use_unpadded(self) -> bool:
        """Run the backbone on real tokens only (speed/unpadded.py) where its layout allows."""
        from cselab.speed.unpadded import supports_unpadding

        self.unpadded = supports_unpadding(self.backbone)
        return self.unpadded

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name_or_path: str, pooler: str = "auto", mlp: str | bool | None = "auto",
                        mlp_only_train: bool | None = None, max_seq_len: int | None = None,
                        trust_remote_code: bool = False, head_init: str = "bert") -> SentenceEncoder:
        resolved = resolve_model_path(name_or_path)
        check_model_source(name_or_path, resolved)  # what is no model, or cannot be served, says so at once
        path = Path(resolved)
        refuse_pickled_weights(path)
        saved = saved_settings(path)
        if pooler == "auto":
            pooler = saved.get("pooler") or (sentence_transformers_pooler(path) if path.is_dir() else None) or "cls"
        if mlp in ("auto", None):
            mlp = saved.get("mlp")  # None -> SimCSE's rule (MLP with the cls pooler)
        elif isinstance(mlp, str):
            mlp = mlp == "true"
        if mlp_only_train is None:
            mlp_only_train = saved.get("mlp_only_train", True)
        for_inference = max_seq_len is None
        if for_inference:
            # The length a sentence-transformers directory declares (as SentenceTransformer(path) reads it),
            # except an earlier cselab's training length; else the backbone's usable length (below).
            declared = declared_length(path)
            max_seq_len = None if stored_training_length(path, saved, declared) else declared
        tokenizer, backbone, base_pooler = _load_backbone(name_or_path, resolved, trust_remote_code)
        encoder = cls(backbone, tokenizer, pooler=pooler, mlp=mlp, mlp_only_train=mlp_only_train,
                      max_seq_len=max_seq_len or usable_length(backbone, tokenizer), head_init=head_init)
        if for_inference:
            encoder.train_max_seq_len = saved.get("max_seq_len")
        # A cselab model names the model it was trained from: a card names that, not a local directory.
        encoder.base_model = saved.get("base_model") if isinstance(saved.get("base_model"), str) else name_or_path
        encoder.citation = citations.join(*(e for e in saved.get("citations") or [] if isinstance(e, str)))
        encoder.base_pooler = base_pooler
        load_mlp(encoder.mlp, path)
        return encoder

    @classmethod
    def from_config(cls, model_config: dict, tokenizer_name_or_path: str = "minilm", pooler: str = "cls",
                    mlp: bool | None = None, mlp_only_train: bool = True, max_seq_len: int = 32,
                    tokenizer=None, head_init: str = "bert") -> SentenceEncoder:
        """A randomly initialised encoder (tests, MLM pre-training) with a given tokenizer's vocabulary:
        ``tokenizer`` (one built already, such as a WordPiece vocabulary trained on the corpus), else
        the tokenizer of ``tokenizer_name_or_path``."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        try:
            if tokenizer is None:
                tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(tokenizer_name_or_path))
        except Exception as exc:  # not a local directory, no Hub, corrupt files: the name's fault
            first = first_line(exc, 300)
            raise ModelLoadError(f"{tokenizer_name_or_path}: cannot load its tokenizer (for model.from_config): "
                                 f"{first}") from None
        params = dict(model_config)
        model_type = params.pop("model_type", "bert")
        params.setdefault("vocab_size", len(tokenizer))
        params.setdefault("pad_token_id", tokenizer.pad_token_id or 0)
        try:
            config = AutoConfig.for_model(model_type, **params)
            backbone = (AutoModel.from_config(config, add_pooling_layer=False) if model_type == "bert"
                        else AutoModel.from_config(config))
            _detach_pooler(backbone, ("pooler.",))  # random weights: nothing to keep
        except Exception as exc:  # any invalid setting of the user's dict (types, sizes, unknown model_type)
            first = first_line(exc, 200, empty="")
            raise ModelLoadError(f"model.from_config: cannot build a model from it ({type(exc).__name__}: "
                                 f"{first})") from None
        return cls(backbone, tokenizer, pooler=pooler, mlp=mlp, mlp_only_train=mlp_only_train, max_seq_len=max_seq_len,
                   head_init=head_init)

    # -- forward --------------------------------------------------------------------------------
    @property
    def hidden_size(self) -> int:
        return self.backbone.config.hidden_size

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def add_special_tokens(self, tokens: tuple[str, ...] | list[str]) -> list[str]:
        """Keep placeholder tokens (CLEAR's ``[DEL]``) whole: new vocabulary entries, with embedding
        rows added to the backbone (saved with the model). Returns the tokens that were new."""
        new = [t for t in dict.fromkeys(tokens) if t not in self.tokenizer.get_vocab()]
        if new:
            self.tokenizer.add_tokens(new, special_tokens=True)  # never split, never lower-cased
            self.backbone.resize_token_embeddings(len(self.tokenizer))
        return new

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        # Dynamic padding: pad to the longest sentence of this batch only.
        return self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_seq_len,
                              return_tensors="pt")

    def forward(self, features: dict[str, torch.Tensor], use_mlp: bool | None = None,
                real_tokens: int | None = None) -> torch.Tensor:
        """Pooled sentence vectors; the MLP applies in training, or always unless mlp_only_train.
        ``real_tokens``: the attention mask's sum when the caller knows it on the host (the unpadded
        forward then needs no read-back from the device)."""
        compiled = self.compiled_layers if self.unpadded and self.compiles(real_tokens) else None
        return self.pooled_by(self.backbone, features, use_mlp, real_tokens, compiled)

    def pooled_by(self, backbone: nn.Module, features: dict[str, torch.Tensor], use_mlp: bool | None = None,
                  real_tokens: int | None = None, compiled: CompiledRows | None = None) -> torch.Tensor:
        """``forward`` with ``backbone`` in place of the encoder's own (ESimCSE's momentum copy: the same
        layout, pooler and MLP); ``compiled``: the compiled unpadded layers to run, if any."""
        inputs = {k: v for k, v in features.items() if k in ENCODER_INPUTS}
        need_all = self.pooler in NEEDS_HIDDEN_STATES
        if self.unpadded:
            from cselab.speed.unpadded import unpadded_forward

            hidden_states = unpadded_forward(backbone, **inputs, all_hidden_states=need_all,
                                             real_tokens=real_tokens, compiled=compiled)
        else:
            output = backbone(**inputs, output_hidden_states=need_all, return_dict=True)
            hidden_states = output.hidden_states if need_all else (output.last_hidden_state,)
        pooled = self.pool(hidden_states, features["attention_mask"])
        if use_mlp is None:
            use_mlp = self.training or not self.mlp_only_train
        if self.mlp is not None and use_mlp:
            pooled = self.mlp(pooled)
        return pooled

    def token_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The backbone's last hidden states, (batch, length, h), on the padded layout (the MLM pass)."""
        inputs = {k: v for k, v in features.items() if k in ENCODER_INPUTS}
        return self.backbone(**inputs, return_dict=True).last_hidden_state

    def input_embeddings(self) -> torch.Tensor:
        """The input embedding matrix (V, h): the MLM decoder's tied weight."""
        return self.backbone.get_input_embeddings().weight

    @torch.no_grad()
    def encode(self, sentences: Iterable[str], batch_size: int = 128, normalize: bool = False,
               precision: str = "fp32", show_progress: bool = False) -> np.ndarray:
        """Embeddings for ``sentences`` (float32, in input order), batched by length, no gradient.

        ``precision``: fp32, bf16, fp16, or auto (hardware.py: what is fast on this device).
        Each batch's vectors go to the host as soon as they are computed (device memory holds one
        batch, not all of them); on a GPU the next batch is tokenised while the current one runs."""
        sentences = list(sentences)
        result = np.empty((len(sentences), self.output_size), dtype=np.float32)
        if not sentences:
            return result
        was_training = self.training
        self.eval()
        device = self.device
        if precision == "auto":
            precision = choose_precision("auto", device, self.hidden_size).precision
        # Similar lengths in one batch waste little padding; results go back to input order.
        order = np.argsort([-len(s) for s in sentences], kind="stable")
        batches = [order[start:start + batch_size] for start in range(0, len(sentences), batch_size)]
        pending = None  # the previous batch: its copy to the host may still be under way
        try:
            for rows, features in self._tokenized(sentences, batches, device, show_progress):
                features = {k: v.to(device, non_blocking=True) for k, v in features.items()}
                with autocast(device, precision):
                    vectors = self(features).float()
                if normalize:
                    vectors = torch.nn.functional.normalize(vectors, dim=-1)
                if pending is not None:
                    self._store(result, *pending)
                pending = self._to_host(rows, vectors)
            self._store(result, *pending)
        finally:
            self.train(was_training)
        return result

    def _tokenized(self, sentences: list[str], batches: list[np.ndarray], device: torch.device,
                   show_progress: bool) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        """(rows, features) per batch. On a GPU one thread tokenises (into pinned memory) the batch
        after the one the GPU is running; a fast tokenizer releases the GIL, so the two overlap. On a
        CPU the thread measured no faster than tokenising inline (it takes a core from the matmuls)."""
        if show_progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="encode", unit="batch")
        pin = device.type == "cuda"

        def tokenize(rows: np.ndarray) -> tuple[np.ndarray, dict[str, torch.Tensor]]:
            features = self.tokenize([sentences[i] for i in rows])
            return rows, {k: v.pin_memory() for k, v in features.items()} if pin else features

        if not self.prefetch_tokens(device):
            for rows in batches:
                yield tokenize(rows)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode-tokenize") as pool:
            ahead = None
            for rows in batches:
                submitted = pool.submit(tokenize, rows)  # the next batch, while the caller runs this one
                if ahead is not None:
                    yield ahead.result()
                ahead = submitted
            if ahead is not None:
                yield ahead.result()

    @staticmethod
    def prefetch_tokens(device: torch.device) -> bool:
        """Whether ``encode`` tokenises ahead in a thread: on a GPU (a test may say yes on a CPU)."""
        return device.type == "cuda"

    @staticmethod
    def _to_host(rows: np.ndarray, vectors: torch.Tensor) -> tuple[np.ndarray, torch.Tensor, object]:
        """Start copying a batch's vectors to the host: from a GPU into pinned memory without waiting
        (the event says when it is there), so the GPU goes on with the next batch meanwhile."""
        if vectors.device.type != "cuda":
            return rows, vectors.to("cpu"), None
        host = torch.empty(vectors.shape, dtype=vectors.dtype, pin_memory=True).copy_(vectors, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record()
        return rows, host, copied

    @staticmethod
    def _store(result: np.ndarray, rows: np.ndarray, host: torch.Tensor, copied) -> None:
        """A batch's vectors into their rows of ``result`` (input order), once the copy has arrived."""
        if copied is not None:
            copied.synchronize()
        result[rows] = host.numpy()

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def _state_with_pooler(self) -> dict[str, torch.Tensor] | None:
        """The backbone's weights plus BERT's pooler, which was taken out (``_detach_pooler``), so that
        Hugging Face and sentence-transformers load the saved model complete instead of initialising a
        pooler at random (and warning so); None when the backbone has its own pooler or none."""
        if getattr(self.backbone, "pooler", "absent") is not None or self.backbone.config.model_type not in BERT_LIKE:
            return None
        pooler = {f"pooler.{key}": value for key, value in self._pooler_weights().items()}
        return {**self.backbone.state_dict(), **pooler}

    def _pooler_weights(self) -> dict[str, torch.Tensor]:
        """SimCSE's MLP where it runs over [CLS] (the pooler is that same layer: SimCSE's own conversion to
        Hugging Face stores it there); else the base model's pooler as loaded; else an identity layer."""
        if self.mlp is not None and self.pooler == "cls":
            return {f"dense.{key}": value for key, value in self.mlp.dense.state_dict().items()}
        if self.base_pooler is not None:
            return self.base_pooler
        weight = self.input_embeddings()
        size = self.hidden_size
        return {"dense.weight": torch.eye(size, dtype=weight.dtype, device=weight.device),
                "dense.bias": torch.zeros(size, dtype=weight.dtype, device=weight.device)}

    # -- saving ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write a sentence-transformers directory (safetensors only) plus cselab's own settings and a
        model card (README.md, ``model/card.py``)."""
        from cselab.model.card import write_card

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = self.backbone.config
        if self.pooler in NEEDS_HIDDEN_STATES:
            config.output_hidden_states = True  # sentence-transformers then passes every layer on
        # Replace, never write through: a training checkpoint may hold this file as a hard link.
        (path / "model.safetensors").unlink(missing_ok=True)
        with quiet_transformers():  # no progress bar for writing one file
            self.backbone.save_pretrained(path, safe_serialization=True, state_dict=self._state_with_pooler())
        self.tokenizer.save_pretrained(path)
        if self.mlm_head is not None:  # continued pre-training resumes it (sentence-transformers ignores the file)
            self.mlm_head.save(path)
        dense = self.mlp.dense if self.mlp is not None and not self.mlp_only_train else None  # the MLP at inference
        # Inference reads the model's full length: the training length would cut every longer sentence.
        inference_length = usable_length(self.backbone, self.tokenizer)
        write_sentence_transformers_files(path, config, self.pooler, dense, inference_length)
        if self.mlp is not None and self.mlp_only_train:
            save_mlp(self.mlp, path)  # kept so training can continue from this directory; encoding does not use it
        write_settings(path, pooler=self.pooler, mlp=self.mlp is not None, mlp_only_train=self.mlp_only_train,
                       max_seq_len=self.train_max_seq_len, base_model=self.base_model,
                       citations=citations.entries(self.citation))
        write_card(path)
        follow_umask(*weight_files(path))  # safetensors writes 0600; the folder's other files follow the umask
        return path


@contextlib.contextmanager
def quiet_transformers():
    """transformers' logging at errors only and no progress bars, as they were afterwards."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()


def _fitting_length(max_seq_len: int, backbone: nn.Module) -> int:
    """``max_seq_len`` cut to what the position embeddings allow: longer inputs would index past them."""
    limit = position_limit(backbone)
    if limit is None or max_seq_len <= limit:
        return max_seq_len
    if limit < 4:
        raise ModelLoadError(f"the model has {limit} position embeddings; cselab needs at least 4")
    log.warning("max_seq_len %d is more than the model's %d positions; using %d", max_seq_len, limit, limit)
    return limit


def _load_backbone(name_or_path: str, resolved: str, trust_remote_code: bool):
    """(tokenizer, backbone, the BERT pooler's weights or None); a ModelLoadError in one line when the
    directory or name gives no model (missing or corrupt files, bad config values, no Hub access)."""
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(resolved, trust_remote_code=trust_remote_code)
        with quiet_transformers():  # a missing pooler is handled below, not worth a report
            # fp32 master weights whatever dtype the checkpoint was stored in (transformers 5 would
            # otherwise keep it: fp16 gradients that the GradScaler refuses, bf16 updates lost to rounding).
            backbone, info = AutoModel.from_pretrained(resolved, use_safetensors=True, output_loading_info=True,
                                                       trust_remote_code=trust_remote_code,
                                                       **{_dtype_keyword(): torch.float32})
    except Exception as exc:  # whatever the files make transformers or tokenizers raise: the files' fault
        first = first_line(exc)
        where = "a local directory" if Path(resolved).exists() else "not a local directory, and the Hugging Face Hub"
        raise ModelLoadError(f"{name_or_path}: cannot load a model ({where}: {first[:300]}); pass a model "
                             f"directory (a Hugging Face or sentence-transformers one) or 'minilm'") from None
    return tokenizer, backbone, _detach_pooler(backbone, info["missing_keys"])


@functools.cache
def _dtype_keyword() -> str:
    """``dtype`` (transformers >= 4.56), ``torch_dtype`` before it."""
    import transformers
    from packaging.version import Version

    return "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"




def _detach_pooler(backbone: nn.Module, missing_keys) -> dict[str, torch.Tensor] | None:
    """cselab pools itself, so the model's own pooler gets no gradient, and a trainable parameter
    without one stops DistributedDataParallel at the second step. BERT's (and RoBERTa's) is taken out
    of the backbone, its weights (when the checkpoint had them) returned for saving; any other
    model's (MPNet, ALBERT, ...: saved as loaded) is frozen."""
    pooler = getattr(backbone, "pooler", None)
    if not isinstance(pooler, nn.Module):
        return None
    if backbone.config.model_type not in BERT_LIKE:
        pooler.requires_grad_(False)
        return None
    backbone.pooler = None
    if any("pooler." in key for key in missing_keys):
        return None  # initialised at random by transformers: nothing worth keeping
    return {key: value.detach().clone() for key, value in pooler.state_dict().items()}
