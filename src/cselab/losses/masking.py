"""BERT's token masking: what the collator makes for the MLM pass (``mlm.py``), in the loader's workers.

15% of the real tokens are selected (never special tokens or padding); of those 80% become
[MASK], 10% a random token and 10% stay (Devlin et al., 2019), by
``transformers.DataCollatorForLanguageModeling``. Its generator is seeded per step, so a step's
masks do not depend on which worker made it, and a resumed run masks exactly as an uninterrupted one.

Whole-word masking (``whole_word``; Google's BERT release, 2019): the 15% are drawn per word, and a
selected word has all its pieces selected; each selected piece then gets its own 80/10/10 draw, as
in BERT's ``create_pretraining_data.py``. Words are told apart from the vocabulary alone (WordPiece's
``##`` continuation mark, or SentencePiece's ``▁`` / byte-level BPE's ``Ġ`` word-start mark), so
packed blocks of bare token ids (``data/packing.py``) are masked the same way as sentences.
"""
from __future__ import annotations

import torch

from cselab.losses.base import TokenBatch

IGNORE = -100  # transformers' label for "not predicted"


def word_continuation_table(tokenizer) -> torch.Tensor:
    """(V,) bool: whether token id v continues the word of the token before it."""
    tokens = [token or "" for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
    if any(token.startswith("##") for token in tokens):
        return torch.tensor([token.startswith("##") for token in tokens])
    special = set(tokenizer.all_special_tokens)
    for word_start in ("▁", "Ġ"):  # SentencePiece, byte-level BPE: the mark is on a word's first piece
        if sum(token.startswith(word_start) for token in tokens) > len(tokens) // 10:
            return torch.tensor([not token.startswith(word_start) and token not in special for token in tokens])
    raise ValueError(f"whole_word: cannot tell where words start in the vocabulary of {type(tokenizer).__name__} "
                     f"(no WordPiece '##', SentencePiece '▁' or byte-level BPE 'Ġ' marks); set whole_word: false")


class MlmMasking:
    def __init__(self, tokenizer, probability: float = 0.15, mask_replace_prob: float = 0.8,
                 random_replace_prob: float = 0.1, whole_word: bool = False):
        from transformers import DataCollatorForLanguageModeling

        self._collator = DataCollatorForLanguageModeling(
            tokenizer, mlm=True, mlm_probability=probability, mask_replace_prob=mask_replace_prob,
            random_replace_prob=random_replace_prob)
        self._special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))
        self.probability, self.mask_replace_prob, self.random_replace_prob = (probability, mask_replace_prob,
                                                                              random_replace_prob)
        self.mask_id, self.vocab_size = tokenizer.mask_token_id, len(tokenizer)
        self._continues_word = word_continuation_table(tokenizer) if whole_word else None

    def __call__(self, features: dict[str, torch.Tensor], seed: int) -> TokenBatch:
        """The features with the selected tokens replaced; positions: the selected tokens in the
        flattened (batch x length) layout; labels: their original ids."""
        ids = features["input_ids"].clone()
        protected = torch.isin(ids, self._special_ids.to(ids.dtype)) | (features["attention_mask"] == 0)
        generator = torch.Generator().manual_seed(seed)
        if self._continues_word is None:
            self._collator.generator = generator
            masked, labels = self._collator.torch_mask_tokens(ids, special_tokens_mask=protected)
        else:
            masked, labels = self._mask_whole_words(ids, protected, generator)
        flat = labels.reshape(-1)
        positions = (flat != IGNORE).nonzero().squeeze(1)
        return TokenBatch(features={**features, "input_ids": masked}, positions=positions, labels=flat[positions])

    def _mask_whole_words(self, ids: torch.Tensor, protected: torch.Tensor,
                          generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked ids, labels): words selected with ``probability``, then 80/10/10 per selected piece."""
        continues = self._continues_word[ids] & ~protected
        # A piece right after a protected token starts a word of its own (a packed block may begin
        # in the middle of a word): words never reach across [CLS], [SEP] or padding.
        after_protected = torch.zeros_like(protected)
        after_protected[:, 1:] = protected[:, :-1]
        starts = ~continues | after_protected
        columns = torch.arange(ids.shape[1]).expand_as(ids)
        word_start = torch.where(starts, columns, 0).cummax(dim=1).values  # each piece's word's first piece
        word_draw = torch.rand(ids.shape, generator=generator).gather(1, word_start)
        selected = (word_draw < self.probability) & ~protected
        how = torch.rand(ids.shape, generator=generator)
        to_mask = selected & (how < self.mask_replace_prob)
        to_random = selected & ~to_mask & (how < self.mask_replace_prob + self.random_replace_prob)
        random_ids = torch.randint(self.vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
        masked = torch.where(to_random, random_ids, ids.masked_fill(to_mask, self.mask_id))
        return masked, torch.where(selected, ids, torch.full_like(ids, IGNORE))
