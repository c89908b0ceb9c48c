"""BERT's token masking for the MLM term, done in the data collator (so in the loader's workers).

15% of the real tokens are selected (never special tokens or padding); of those 80% become
[MASK], 10% a random token and 10% stay (Devlin et al., 2019), by
``transformers.DataCollatorForLanguageModeling``. Its generator is seeded per step, so a step's
masks do not depend on which worker made it, and a resumed run masks exactly as an uninterrupted one.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE = -100  # transformers' label for "not predicted"


@dataclass
class MaskedBatch:
    """Masked token ids to run through the backbone, and where the predictions are due.

    features: the tokenised sentences with the selected tokens replaced; positions: (K,) indices of
    the selected tokens in the flattened (batch x length) layout; labels: (K,) their original ids.
    """

    features: dict[str, torch.Tensor]
    positions: torch.Tensor
    labels: torch.Tensor


class MlmMasking:
    def __init__(self, tokenizer, probability: float = 0.15, mask_replace_prob: float = 0.8,
                 random_replace_prob: float = 0.1):
        from transformers import DataCollatorForLanguageModeling

        self._collator = DataCollatorForLanguageModeling(
            tokenizer, mlm=True, mlm_probability=probability, mask_replace_prob=mask_replace_prob,
            random_replace_prob=random_replace_prob)
        self._special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    def __call__(self, features: dict[str, torch.Tensor], seed: int) -> MaskedBatch:
        ids = features["input_ids"].clone()
        protected = torch.isin(ids, self._special_ids.to(ids.dtype)) | (features["attention_mask"] == 0)
        self._collator.generator = torch.Generator().manual_seed(seed)
        masked, labels = self._collator.torch_mask_tokens(ids, special_tokens_mask=protected)
        flat = labels.reshape(-1)
        positions = (flat != IGNORE).nonzero().squeeze(1)
        return MaskedBatch(features={**features, "input_ids": masked}, positions=positions, labels=flat[positions])
