"""Masked language modelling as an objective term (CLEAR's L_MLM; raw-encoder pre-training).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (3):
L_total = L_MLM + L_CL, with BERT's masking: 15% of the tokens are selected, of which 80% become
[MASK], 10% a random token and 10% stay unchanged (Devlin et al., 2019); ``whole_word: true``
selects whole words instead of word pieces (BERT's whole-word masking), at the same rates. Masking
happens in the data collator (``data/masking.py``, with this term's rates); the training step runs the backbone
on the masked tokens and hands this term ``inputs.masked``.

The masked tokens are predicted by the backbone's own MLM head (``model/mlm_head.py``: BERT's
``cls.predictions``, loaded with the pre-trained weights where the checkpoint has them, saved with
the model); the step hands this term its logits, and the term is the cross-entropy.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, accuracy


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
        self.probability = probability
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        # The data collator masks with these rates (data/masking.py).
        self.masking = {"probability": probability, "mask_replace_prob": mask_replace_prob,
                        "random_replace_prob": random_replace_prob, "whole_word": whole_word}

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if inputs.masked is None:
            raise ValueError("mlm: the step provided no masked tokens (the training loop masks for this term)")
        logits, labels = inputs.masked.logits.float(), inputs.masked.labels
        if not len(labels):  # e.g. a batch of empty sentences: nothing to predict
            return logits.sum() * 0.0, {"loss": logits.new_zeros(()), "acc": logits.new_zeros(())}
        loss = F.cross_entropy(logits, labels)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, labels)}
