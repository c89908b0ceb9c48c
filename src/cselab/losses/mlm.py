"""Masked language modelling as an objective term (CLEAR's L_MLM; raw-encoder pre-training).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (3):
L_total = L_MLM + L_CL, with BERT's masking: 15% of the tokens are selected, of which 80% become
[MASK], 10% a random token and 10% stay unchanged (Devlin et al., 2019). Special tokens and
padding are never selected; masking is done by ``transformers.DataCollatorForLanguageModeling``.

The term runs its own forward pass through ``extra["encoder"].backbone`` on the original
sentences' token ids when the batch carries them (``extra["original_features"]``), else on the
anchors' (the first view when ``views.anchor`` is an augmenter), and predicts the selected tokens with a
BERT-style prediction head: dense(h, h) -> the backbone's activation -> LayerNorm -> decoder whose
weight is tied to the backbone's input embeddings (``tie_to_input_embeddings``), plus a bias.
Head sizes come from the backbone at the first step unless ``hidden_size``/``vocab_size`` are given.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab.losses import LOSSES
from cselab.losses._deferred import DeferredParameters, init_linear_
from cselab.losses.base import StepOutputs

IGNORE = -100  # label of tokens that are not predicted (transformers' convention)


def input_embedding_weight(backbone: nn.Module) -> torch.Tensor | None:
    try:
        embeddings = backbone.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    return getattr(embeddings, "weight", None)


@LOSSES.register("mlm", "masked language modelling on the anchors (15%, 80/10/10), tied prediction head")
class MaskedLanguageModelLoss(DeferredParameters, nn.Module):
    def __init__(self, probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 tie_to_input_embeddings: bool = True, hidden_size: int | None = None, vocab_size: int | None = None):
        super().__init__()
        if not 0 < probability < 1:
            raise ValueError("probability must be in (0, 1)")
        if mask_replace_prob < 0 or random_replace_prob < 0 or mask_replace_prob + random_replace_prob > 1:
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        self.probability = probability
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        self.tie_to_input_embeddings = tie_to_input_embeddings
        names = ["transform_weight", "transform_bias", "norm_weight", "norm_bias", "decoder_bias"]
        self._declare_deferred(*names, *([] if tie_to_input_embeddings else ["decoder_weight"]))
        if tie_to_input_embeddings:
            self.decoder_weight = None
        self._masker = None
        if hidden_size is not None and vocab_size is not None:
            self._materialize(hidden_size, vocab_size, torch.device("cpu"))

    # -- parameters ------------------------------------------------------------------------------
    def _materialize(self, hidden_size: int, vocab_size: int, device: torch.device) -> None:
        with torch.no_grad():
            init_linear_(self._size("transform_weight", (hidden_size, hidden_size), device),
                         self._size("transform_bias", (hidden_size,), device))
            self._size("norm_weight", (hidden_size,), device).fill_(1.0)
            self._size("norm_bias", (hidden_size,), device).zero_()
            self._size("decoder_bias", (vocab_size,), device).zero_()
            if not self.tie_to_input_embeddings:
                nn.init.normal_(self._size("decoder_weight", (vocab_size, hidden_size), device), std=0.02)

    def _size_from_backbone(self, backbone: nn.Module, device: torch.device) -> None:
        embedding = input_embedding_weight(backbone)
        vocab_size = embedding.shape[0] if embedding is not None else backbone.config.vocab_size
        self._materialize(backbone.config.hidden_size, vocab_size, device)

    def decoder(self, backbone: nn.Module) -> torch.Tensor:
        """The output embedding matrix: the backbone's input embeddings when tied."""
        if self.decoder_weight is not None:
            return self.decoder_weight
        weight = input_embedding_weight(backbone)
        if weight is None:
            raise ValueError("mlm: this backbone exposes no input embeddings to tie to; "
                             "set tie_to_input_embeddings: false in the objective term")
        return weight

    # -- masking ---------------------------------------------------------------------------------
    def mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked input ids, labels with IGNORE where no prediction is made); never specials or padding."""
        if self._masker is None:
            from transformers import DataCollatorForLanguageModeling

            self._masker = DataCollatorForLanguageModeling(
                tokenizer, mlm=True, mlm_probability=self.probability, mask_replace_prob=self.mask_replace_prob,
                random_replace_prob=self.random_replace_prob)
        ids = input_ids.detach().cpu().clone()
        protected = torch.isin(ids, torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=ids.dtype))
        protected |= attention_mask.detach().cpu() == 0
        masked, labels = self._masker.torch_mask_tokens(ids, special_tokens_mask=protected)
        return masked.to(input_ids.device), labels.to(input_ids.device)

    @staticmethod
    def source_tokens(outputs: StepOutputs) -> dict[str, torch.Tensor]:
        """The original sentences' tokens when the batch carries them (``extra["original_features"]``,
        CLEAR masks the originals), else the anchor rows of the step's tokenised batch."""
        original = outputs.extra.get("original_features")
        if original is not None:
            return {k: v.to(outputs.anchor.device) for k, v in original.items()
                    if k in ("input_ids", "attention_mask", "token_type_ids")}
        features, rows = outputs.extra["features"], outputs.extra["roles"]["anchor"]
        return {k: features[k][rows] for k in ("input_ids", "attention_mask", "token_type_ids") if k in features}

    # -- loss ------------------------------------------------------------------------------------
    def forward(self, outputs: StepOutputs) -> tuple[torch.Tensor, dict[str, float]]:
        encoder = outputs.extra["encoder"]
        backbone = encoder.backbone
        if not self.sized:
            self._size_from_backbone(backbone, outputs.anchor.device)
        tokens = self.source_tokens(outputs)
        attention_mask = tokens["attention_mask"]
        masked, labels = self.mask(tokens["input_ids"], attention_mask, encoder.tokenizer)
        selected = labels != IGNORE
        if not selected.any():  # e.g. a batch of empty sentences: nothing to predict
            return self.transform_bias.sum() * 0.0, {"mlm": 0.0}
        inputs = {"input_ids": masked, "attention_mask": attention_mask}
        if "token_type_ids" in tokens:
            inputs["token_type_ids"] = tokens["token_type_ids"]
        # Same precision as the step's main pass (the loop runs terms outside its autocast).
        low_precision = outputs.anchor.dtype in (torch.bfloat16, torch.float16)
        with torch.autocast(masked.device.type, dtype=outputs.anchor.dtype if low_precision else torch.bfloat16,
                            enabled=low_precision):
            states = backbone(**inputs, return_dict=True).last_hidden_state[selected].float()
        from transformers.activations import ACT2FN

        config = backbone.config
        activation = ACT2FN[getattr(config, "hidden_act", "gelu")]
        hidden = activation(F.linear(states, self.transform_weight, self.transform_bias))
        hidden = F.layer_norm(hidden, hidden.shape[-1:], self.norm_weight, self.norm_bias,
                              eps=getattr(config, "layer_norm_eps", 1e-12))
        logits = F.linear(hidden, self.decoder(backbone).float(), self.decoder_bias)
        loss = F.cross_entropy(logits, labels[selected])
        accuracy = (logits.argmax(dim=-1) == labels[selected]).float().mean().item()
        return loss, {"mlm": loss.item(), "mlm_acc": accuracy}
