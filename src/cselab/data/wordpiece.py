"""A BERT WordPiece vocabulary trained on the run's own training lines (``model.wordpiece_vocab_size``).

With ``model.from_config`` the encoder is new, so its vocabulary may be new too: instead of the
tokenizer of ``model.name_or_path`` (bert-base-uncased's 30,522 pieces by default), a vocabulary of
the asked size is trained on the lines the run trains on (never on the lines held out for
validation) with the ``tokenizers`` library's ``WordPieceTrainer``, under bert-base-uncased's rules:
lower-cased, accents stripped, split on white space and punctuation (``BertNormalizer``,
``BertPreTokenizer``), ``##`` marking a piece that continues a word, and the special tokens
``[PAD] [UNK] [CLS] [SEP] [MASK]`` at ids 0 to 4. It is wrapped as a ``BertTokenizerFast``, so
everything downstream (collator, masking, whole-word masking, the token-id cache, the saved model
directory) reads it like any BERT tokenizer.

Training is deterministic. The trainer alone is not: it numbers the ``##`` pieces of single
characters in the order of a hash map, and that order breaks ties between merges of equal count,
so two runs on one corpus could differ by a few pieces. A first pass over the lines therefore finds
those pieces, and the second, the real training, receives them up front, sorted, as fixed entries
of the vocabulary. The result (a ``tokenizers`` JSON file) is cached in
``$CSELAB_CACHE/wordpiece`` (default ``~/.cache/cselab/wordpiece``), keyed by the training lines
(the corpus's content digest and the lines kept: ``data/indexed.py``), the size and these rules; it
is written to a part file of this process and linked into place only where no other process put one
first, and every process reads the file in place. A repeated or resumed run reads the very same
file, so its vocabulary is the same, bit for bit.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cselab.config.validation import MIN_VOCAB_SIZE
from cselab.data.corpus import corpus_fingerprint
from cselab.data.indexed import cache_dir, own_part
from cselab.errors import ConfigError

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0 to 4, as in bert-base-uncased
PREFIX = "##"  # marks a piece that continues a word
MAX_WORD_CHARS = 100  # a longer word is one [UNK], as in BERT
# Everything besides the lines and the size that decides the vocabulary: part of the cache key.
RULES = f"wordpiece-v1|bert-uncased|{'/'.join(SPECIAL_TOKENS)}|{PREFIX}|{MAX_WORD_CHARS}"
BATCH_LINES = 1000  # lines per batch handed to the (Rust) trainer


@dataclass
class WordPieceVocabulary:
    """The trained tokenizer, the cache file it was read from, and whether this call trained it."""

    tokenizer: object  # transformers.BertTokenizerFast
    file: Path
    trained: bool
    lines: int  # the lines it was trained on
    seconds: float = 0.0  # training time (0 when read from the cache)
    size: int = 0  # pieces as trained (the tokenizer may grow later: CLEAR's [DEL] is added to it)

    def note(self) -> str:
        """One line for the run's log: the size, and where it came from."""
        size = f"{self.size:,} pieces"
        if self.trained:
            return (f"WordPiece vocabulary: {size}, trained on {self.lines:,} training lines in {self.seconds:.1f} s "
                    f"(cached as {self.file})")
        return f"WordPiece vocabulary: {size}, trained on {self.lines:,} training lines earlier (cached as {self.file})"


def cache_key(lines: Sequence[str], vocab_size: int) -> str:
    return hashlib.sha256(f"{corpus_fingerprint(lines)}|{vocab_size}|{RULES}".encode()).hexdigest()[:24]


def wordpiece_tokenizer(lines: Sequence[str], vocab_size: int, model_max_length: int = 512,
                        progress: bool = True) -> WordPieceVocabulary:
    """A BERT tokenizer whose WordPiece vocabulary of (at most) ``vocab_size`` pieces is trained on
    ``lines``: read from the cache, or trained into it now. ``progress``: the trainer's progress bars
    (on a terminal only)."""
    if vocab_size < MIN_VOCAB_SIZE:
        raise ConfigError(f"model.wordpiece_vocab_size: must be >= {MIN_VOCAB_SIZE}, got {vocab_size}")
    directory = cache_dir("wordpiece")
    file = directory / f"{cache_key(lines, vocab_size)}.tokenizer.json"
    trained, seconds = False, 0.0
    backend = _read(file)
    if backend is None:
        directory.mkdir(parents=True, exist_ok=True)
        log.info("training a WordPiece vocabulary of %d pieces on %d training lines (once; cached in %s)",
                 vocab_size, len(lines), directory)
        start = time.perf_counter()
        _publish(file, train_wordpiece(lines, vocab_size, progress and sys.stderr.isatty()).to_str())
        seconds, trained = time.perf_counter() - start, True
        backend = _read(file)
        if backend is None:  # pragma: no cover - the file was just written
            raise OSError(f"{file}: cannot read the WordPiece vocabulary just written")
    if len(backend.get_vocab()) < vocab_size:
        log.info("the training lines give %d WordPiece pieces, fewer than the %d asked for",
                 len(backend.get_vocab()), vocab_size)
    tokenizer = bert_tokenizer(backend, model_max_length)
    vocabulary = WordPieceVocabulary(tokenizer, file, trained, len(lines), seconds, len(tokenizer))
    log.info("%s", vocabulary.note())
    return vocabulary


def _bare_tokenizer(vocab: dict[str, int] | None = None):
    """An untrained (or, given ``vocab``, a finished) WordPiece tokenizer under bert-base-uncased's rules."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=PREFIX,
                                           max_input_chars_per_word=MAX_WORD_CHARS))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                      lowercase=True)  # strip_accents None: with lowercase
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=PREFIX)
    return tokenizer


def _batches(lines: Sequence[str]) -> Iterator[list[str]]:
    for first in range(0, len(lines), BATCH_LINES):
        yield [lines[i] for i in range(first, min(first + BATCH_LINES, len(lines)))]


def _trained_vocab(lines: Sequence[str], vocab_size: int, fixed: Sequence[str], progress: bool) -> dict[str, int]:
    """The trainer's vocabulary (token -> id), ``fixed`` first (ids 0, 1, ...)."""
    from tokenizers import trainers

    tokenizer = _bare_tokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=list(fixed),
                                        continuing_subword_prefix=PREFIX, show_progress=progress)
    tokenizer.train_from_iterator(_batches(lines), trainer=trainer, length=len(lines))
    return tokenizer.get_vocab(with_added_tokens=False)


def train_wordpiece(lines: Sequence[str], vocab_size: int, progress: bool = False):
    """The trained ``tokenizers.Tokenizer`` (not cached: see :func:`wordpiece_tokenizer`)."""
    from tokenizers import AddedToken, processors

    # Pass 1 stops before any merge: the characters, and the "##" pieces of those that continue words.
    characters = _trained_vocab(lines, len(SPECIAL_TOKENS), SPECIAL_TOKENS, progress=False)
    continuing = sorted(token for token in characters if token.startswith(PREFIX))
    if vocab_size < len(characters):
        alphabet = len(characters) - len(continuing) - len(SPECIAL_TOKENS)
        raise ConfigError(f"model.wordpiece_vocab_size: {vocab_size} is fewer than the {len(characters)} pieces the "
                          f"training lines' characters alone take ({alphabet} characters, {len(continuing)} of them "
                          f"also continuing words, {len(SPECIAL_TOKENS)} special tokens); set at least "
                          f"{len(characters)}")
    # Pass 2, the training, with those pieces fixed in sorted order (see the module's docstring).
    vocab = _trained_vocab(lines, vocab_size, (*SPECIAL_TOKENS, *continuing), progress)
    if sorted(vocab.values()) != list(range(len(vocab))):  # pragma: no cover - the trainer numbers densely
        raise RuntimeError("WordPieceTrainer returned a vocabulary with gaps in its ids")
    tokenizer = _bare_tokenizer(vocab)
    # Only the five are special (never split, skipped when decoding); the "##" pieces are ordinary.
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tokenizer


def bert_tokenizer(backend, model_max_length: int = 512):
    """``backend`` (a ``tokenizers.Tokenizer``) as a ``transformers`` BERT tokenizer."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast(tokenizer_object=backend, do_lower_case=True, strip_accents=None,
                             tokenize_chinese_chars=True, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                             cls_token="[CLS]", mask_token="[MASK]", model_max_length=model_max_length)


def _read(file: Path):
    """The cached tokenizer, or None when there is none (or it cannot be read: it is trained again)."""
    if not file.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # a damaged file (the part-file writing makes a half-written one unlikely)
        log.warning("%s: cannot read the cached WordPiece vocabulary (%s); training it again", file, exc)
        file.unlink(missing_ok=True)
        return None


def _publish(file: Path, text: str) -> None:
    """Write ``text`` to ``file`` unless another process got there first: the first file stays, so
    every process of a run (each may train at once) reads one and the same vocabulary."""
    part = own_part(file)
    part.write_text(text, encoding="utf-8")
    try:
        os.link(part, file)  # fails where the file exists: never replaces one another process may read
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not file.exists():
            os.replace(part, file)
    finally:
        part.unlink(missing_ok=True)
