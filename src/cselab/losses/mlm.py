"""Masked language modelling: the ``masked`` token pass and the MLM term that reads it (CLEAR's L_MLM;
raw-encoder pre-training).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (3):
L_total = L_MLM + L_CL, with BERT's masking: 15% of the tokens are selected, of which 80% become
[MASK], 10% a random token and 10% stay unchanged (Devlin et al., 2019); ``whole_word: true``
selects whole words instead of word pieces (BERT's whole-word masking), at the same rates.

The pass: the collator masks the step's original sentences with the term's rates (``masking.py``,
in the loader's workers); the step runs the backbone on the masked tokens and the backbone's own MLM
head (``model/mlm_head.py``: BERT's ``cls.predictions``, loaded with the pre-trained weights where the
checkpoint has them, saved with the model) at the masked positions. The term is the cross-entropy.
"""
from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

from cselab import citations
from cselab.losses.base import (
    LOSSES,
    LossInputs,
    LossTerm,
    MaskedTokens,
    TokenBatch,
    TokenPass,
    accuracy,
    register_token_pass,
)
from cselab.losses.masking import MlmMasking
from cselab.model.mlm_head import MlmHead

log = logging.getLogger(__name__)


@register_token_pass("masked", "the step's sentences with BERT's MLM masking, through the backbone and its own "
                               "MLM head at the masked positions")
class MaskedTokensPass(TokenPass):
    def __init__(self, probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 whole_word: bool = False):
        super().__init__()
        self.rates = {"probability": probability, "mask_replace_prob": mask_replace_prob,
                      "random_replace_prob": random_replace_prob, "whole_word": whole_word}

    def preparer(self, tokenizer) -> MlmMasking:
        return MlmMasking(tokenizer, **self.rates)

    def setup(self, encoder: nn.Module, source: str | None) -> None:
        """The backbone's own MLM head, with the weights the model's checkpoint has for it (a Hugging Face
        checkpoint's ``cls.predictions``, a cselab raw encoder's ``mlm_head.safetensors``); a model built
        from a config (``source`` None) starts from the architecture's initialisation. It belongs to the
        encoder, which saves it beside the model."""
        from cselab.sources import resolve_model_path

        encoder.mlm_head = MlmHead(encoder.backbone)
        if source is not None and encoder.mlm_head.load_from(resolve_model_path(source)):
            log.info("MLM head: %s's own weights", source)
        elif source is not None:
            log.info("MLM head: %s has none; it starts from the architecture's initialisation", source)

    def forward(self, tokens: TokenBatch, encoder: nn.Module, inputs: LossInputs) -> MaskedTokens:
        states = encoder.token_states(tokens.features)
        logits = encoder.mlm_head(states.reshape(-1, states.shape[-1]).index_select(0, tokens.positions))
        return MaskedTokens(logits=logits, labels=tokens.labels)


@LOSSES.register("mlm", "masked language modelling (15%, 80/10/10, optionally whole words; masked in the collator), "
                        "the backbone's own MLM head")
class MaskedLanguageModelLoss(LossTerm):
    citation = citations.BERT
    needs = frozenset({"masked"})

    def __init__(self, probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 whole_word: bool = False):
        super().__init__()
        if not 0 < probability < 1:
            raise ValueError("probability must be in (0, 1)")
        if mask_replace_prob < 0 or random_replace_prob < 0 or mask_replace_prob + random_replace_prob > 1:
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        self.token_passes = {"masked": {"probability": probability, "mask_replace_prob": mask_replace_prob,
                                        "random_replace_prob": random_replace_prob, "whole_word": whole_word}}

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if inputs.masked is None:
            raise ValueError("mlm: the step provided no masked tokens (the training loop masks for this term)")
        logits, labels = inputs.masked.logits.float(), inputs.masked.labels
        if not len(labels):  # e.g. a batch of empty sentences: nothing to predict
            return logits.sum() * 0.0, {"loss": logits.new_zeros(()), "acc": logits.new_zeros(())}
        loss = F.cross_entropy(logits, labels)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, labels)}
