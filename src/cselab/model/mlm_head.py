"""The backbone's own masked-LM head: BERT's ``cls.predictions``, RoBERTa's ``lm_head``, ALBERT's ``predictions``.

The head is the module that transformers' ``AutoModelForMaskedLM`` puts beside the base model, built
for the backbone's config (so its layers, activation and initialisation are the architecture's own)
with its decoder tied to the backbone's input embeddings. It belongs to the encoder
(``SentenceEncoder.mlm_head``) and loads with its weights:

* from a Hugging Face checkpoint that has them (``bert-base-uncased``'s ``cls.predictions.*``), so
  CLEAR's MLM term continues the pre-trained head instead of starting from a random one;
* from ``mlm_head.safetensors`` in a directory cselab saved (a raw encoder from ``cselab pretrain``),
  so continued pre-training resumes the trained head.

It is written next to the model whenever the encoder has one; sentence-transformers ignores the file.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from torch import nn

from cselab.errors import ConfigError

log = logging.getLogger(__name__)

MLM_HEAD_FILE = "mlm_head.safetensors"


class MlmHead(nn.Module):
    """Hidden states (K, h) at the masked positions -> vocabulary logits (K, V), by the architecture's head."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        from transformers import AutoModelForMaskedLM

        # The *ForMaskedLM class builds the head with the architecture's own layers and initialisation;
        # its base model is built once here and dropped (the encoder's backbone is the one trained).
        model = AutoModelForMaskedLM.from_config(backbone.config)
        heads = [(name, module) for name, module in model.named_children() if name != model.base_model_prefix]
        if len(heads) != 1:
            raise ConfigError(f"mlm: {type(model).__name__}'s MLM head is not one module "
                              f"({', '.join(name for name, _ in heads) or 'none'}); cselab's MLM term needs one")
        self.prefix, self.head = heads[0]
        decoder = model.get_output_embeddings()
        self.decoder_name = next((name for name, module in self.head.named_modules() if module is decoder), None)
        if self.decoder_name is None:
            raise ConfigError(f"mlm: {type(model).__name__}'s output embeddings are not inside its MLM head")
        decoder.weight = backbone.get_input_embeddings().weight  # tied, as in every *ForMaskedLM

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden)

    def own_state(self) -> dict[str, torch.Tensor]:
        """The head's weights under the checkpoint's names (``cls.predictions.transform.dense.weight``),
        each once (BERT's decoder bias is also ``predictions.bias``), without the decoder's weight:
        that is the backbone's input embedding matrix."""
        tied = f"{self.decoder_name}.weight"
        state, seen = {}, set()
        for name, value in self.head.state_dict().items():
            if name != tied and value.data_ptr() not in seen:
                seen.add(value.data_ptr())
                state[f"{self.prefix}.{name}"] = value
        return state

    def save(self, directory: Path) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous().cpu() for k, v in self.own_state().items()},
                  str(Path(directory) / MLM_HEAD_FILE))

    def load_from(self, source: str) -> bool:
        """The head's weights from ``source`` (a directory or a Hub name), where it has them; False
        (the head keeps the architecture's initialisation) where it has none."""
        tensors = _head_tensors(source, self.prefix)
        if not tensors:
            return False
        missing = sorted(set(self.own_state()) - set(tensors))
        if missing:
            log.warning("%s: the MLM head lacks %s; those start from the architecture's initialisation",
                        source, ", ".join(missing))
        own = {name.removeprefix(self.prefix + "."): value for name, value in tensors.items()}
        own.pop(f"{self.decoder_name}.weight", None)  # the backbone's embeddings, loaded with the backbone
        try:
            self.head.load_state_dict(self._grown_vocabulary(own), strict=False)
        except RuntimeError as error:  # a shape that does not fit this architecture
            raise ConfigError(f"{source}: its MLM head does not fit the model "
                              f"({str(error).splitlines()[-1].strip()[:200]})") from None
        return True


    def _grown_vocabulary(self, own: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokens added to the vocabulary after the head was saved (CLEAR's ``[DEL]``, added by training before
        the head is built) have no saved rows (the decoder's bias): the saved rows load, the new ones keep the
        architecture's initialisation, as their new embedding rows do."""
        vocabulary = self.head.get_submodule(self.decoder_name).weight.shape[0]
        current = self.head.state_dict()
        grown = {}
        for name, value in own.items():
            target = current.get(name)
            if (target is not None and value.dim() >= 1 and target.shape[0] == vocabulary > value.shape[0]
                    and target.shape[1:] == value.shape[1:]):
                value = torch.cat([value.to(target.dtype), target[value.shape[0]:]])
            grown[name] = value
        return grown


def _head_tensors(source: str, prefix: str) -> dict[str, torch.Tensor]:
    """The tensors named ``PREFIX.*`` in ``source``'s weights: cselab's mlm_head.safetensors, else the
    checkpoint's own safetensors files (one file or an index of shards, local or in the Hub cache)."""
    from safetensors import safe_open

    files = _weight_files(source)
    found: dict[str, torch.Tensor] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as weights:
            for name in weights.keys():  # noqa: SIM118 - safe_open has keys(), no __iter__
                if name.startswith(prefix + "."):
                    found[name] = weights.get_tensor(name)
    return found


def _weight_files(source: str) -> list[Path]:
    directory = Path(source)
    if directory.is_dir():
        if (directory / MLM_HEAD_FILE).is_file():
            return [directory / MLM_HEAD_FILE]
        index = directory / "model.safetensors.index.json"
        if index.is_file():
            return [directory / name for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
        single = directory / "model.safetensors"
        return [single] if single.is_file() else []
    from transformers.utils import cached_file

    # A Hub name: the files transformers has already fetched for the backbone (offline: the cache alone).
    for name in (MLM_HEAD_FILE, "model.safetensors"):
        try:
            path = cached_file(source, name, _raise_exceptions_for_missing_entries=False)
        except OSError:
            path = None
        if path:
            return [Path(path)]
    return []
