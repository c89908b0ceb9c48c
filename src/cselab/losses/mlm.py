"""Masked language modelling as an objective term (CLEAR's L_MLM; raw-encoder pre-training).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (3):
L_total = L_MLM + L_CL, with BERT's masking: 15% of the tokens are selected, of which 80% become
[MASK], 10% a random token and 10% stay unchanged (Devlin et al., 2019); ``whole_word: true``
selects whole words instead of word pieces (BERT's whole-word masking), at the same rates. Masking
happens in the data collator (``data/masking.py``, with this term's rates); the training step runs the backbone
on the masked tokens and hands this term ``inputs.masked``: the final hidden states at the masked
positions, the original token ids and the input embedding matrix.

The term predicts the masked tokens with a BERT-style prediction head: dense(h, h) -> the
backbone's activation -> LayerNorm -> decoder whose weight is the backbone's input embeddings
(tied), plus a bias. Sizes, activation and LayerNorm epsilon come from the backbone's config (the
training loop fills them when the recipe leaves them null).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab import citations
from cselab.losses import LOSSES
from cselab.losses.base import LossInputs, accuracy


@LOSSES.register("mlm", "masked language modelling (15%, 80/10/10, optionally whole words; masked in the collator), "
                        "tied prediction head")
class MaskedLanguageModelLoss(nn.Module):
    citation = citations.BERT
    needs = frozenset({"masked"})

    def __init__(self, probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 whole_word: bool = False, hidden_size: int | None = None, vocab_size: int | None = None,
                 hidden_act: str = "gelu", layer_norm_eps: float = 1e-12):
        super().__init__()
        if not 0 < probability < 1:
            raise ValueError("probability must be in (0, 1)")
        if mask_replace_prob < 0 or random_replace_prob < 0 or mask_replace_prob + random_replace_prob > 1:
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        self.probability = probability
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        self.hidden_act = hidden_act
        # The data collator masks with these rates (data/masking.py).
        self.masking = {"probability": probability, "mask_replace_prob": mask_replace_prob,
                        "random_replace_prob": random_replace_prob, "whole_word": whole_word}
        # Sizes left null (a recipe being validated) build no head; training always knows them.
        self.sized = hidden_size is not None and vocab_size is not None
        if self.sized:
            self.transform = nn.Linear(hidden_size, hidden_size)
            self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
            self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if inputs.masked is None or not self.sized:
            raise ValueError("mlm: the step provided no masked tokens (the training loop masks for this term)")
        from transformers.activations import ACT2FN

        masked = inputs.masked
        hidden = ACT2FN[self.hidden_act](self.transform(masked.hidden.float()))
        logits = F.linear(self.norm(hidden), masked.output_embeddings.float(), self.decoder_bias)
        if not len(masked.labels):  # e.g. a batch of empty sentences: nothing to predict
            return logits.sum() * 0.0, {"mlm": logits.new_zeros(()), "mlm_acc": logits.new_zeros(())}
        loss = F.cross_entropy(logits, masked.labels)
        return loss, {"mlm": loss.detach(), "mlm_acc": accuracy(logits, masked.labels)}
