"""Every line's token ids, tokenised once per (corpus content, tokenizer) and cached on disk.

Packing (``data/packing.py``) reads token ids, not text, and sentence-view training
(``SentenceTokenizer``) takes the ids of every row that is a corpus line unchanged from here:
tokenising a corpus takes minutes, so it is done once, shared by every run, seed and epoch on that
corpus, and kept beside the corpus's line index (``$CSELAB_CACHE/token-ids``, default
``~/.cache/cselab``). The key is the corpus fingerprint (its content digest and kept lines,
``data/indexed.py``), the tokenizer's (its whole serialised vocabulary and rules), and the versions
of the corpus reader and of this cache's layout: editing the file, changing the vocabulary or a
release that reads lines or lays out the files differently tokenises again; touching or moving the
file does not.

Three ``.npy`` files per key (no pickle anywhere), each written to a file of its own process and
then moved into place, the ids last (whoever sees them sees the other two):

* ``KEY.ids.npy``: all lines' ids, concatenated, without special tokens (uint16 when the
  largest id fits, else uint32); read memory-mapped, so memory stays flat for any corpus size.
* ``KEY.starts.npy``: (lines + 1,) int64; line i's ids are ``ids[starts[i]:starts[i + 1]]``.
* ``KEY.documents.npy``: (lines,) bool; line i begins a document (the first line, and any line
  after a blank one in the corpus file: a spooled copy of a ``.gz``/CSV/dataset source has none).
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cselab.data.corpus import corpus_fingerprint
from cselab.data.indexed import READER_VERSION, cache_dir, own_part
from cselab.errors import counted
from cselab.file_writes import replace_atomically
from cselab.model.encoder import special_frame

TOKENIZE_CHUNK = 4096  # lines per call of the (batched, Rust) tokenizer
# Part of every cache key: raised when the files' layout or meaning changes, so old caches are not read.
TOKEN_CACHE_VERSION = "2"


# Settings a tokenizer keeps that say where it was loaded from or how its last call padded and
# truncated: not what it does to a text, so not part of its fingerprint.
NOT_IDENTITY = frozenset({
    "truncation", "padding", "name_or_path", "vocab_file", "merges_file", "tokenizer_file", "special_tokens_map_file",
    "cache_dir", "local_files_only", "revision", "token", "use_fast", "_commit_hash", "is_local", "model_max_length",
    "padding_side", "truncation_side", "max_length", "stride", "truncation_strategy", "pad_to_multiple_of",
    "pad_token_type_id",
})


def _option(value):
    """A build option as JSON: an added token with its flags (lstrip, normalized, ...), which change
    how text around it is split, not by its text alone."""
    state = value.__getstate__() if hasattr(value, "__getstate__") else None
    return state if isinstance(state, dict) else str(value)


def tokenizer_fingerprint(tokenizer) -> str:
    """Identity of what the tokenizer does: its serialised rules and vocabulary, added tokens included."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        serialised = json.loads(backend.to_str())
        rules = json.dumps({k: v for k, v in serialised.items() if k not in NOT_IDENTITY})
    else:  # a slow (Python) tokenizer: its vocabulary and the options it was built with (casing, accents, ...)
        options = {k: v for k, v in tokenizer.init_kwargs.items() if k not in NOT_IDENTITY}
        rules = json.dumps([sorted(tokenizer.get_vocab().items()), options], sort_keys=True, default=_option)
    return hashlib.sha256(f"{type(tokenizer).__name__}|{rules}".encode()).hexdigest()


@dataclass
class TokenIds:
    """The cached ids of one corpus under one tokenizer (memory-mapped, read-only)."""

    directory: Path
    key: str

    def __post_init__(self):
        self.ids = np.load(self._file("ids"), mmap_mode="r", allow_pickle=False)
        self.starts = np.load(self._file("starts"), allow_pickle=False)
        self.document_starts = np.load(self._file("documents"), allow_pickle=False)

    def _file(self, part: str) -> Path:
        return self.directory / f"{self.key}.{part}.npy"

    def __len__(self) -> int:
        return len(self.starts) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def line(self, i: int) -> np.ndarray:
        return self.ids[self.starts[i]:self.starts[i + 1]]

    def __reduce__(self):
        # Data-loader workers reopen the files instead of receiving a copy of every id.
        return TokenIds, (self.directory, self.key)


def token_ids(corpus: Sequence[str], tokenizer) -> TokenIds:
    """The corpus's token ids under ``tokenizer``: read from the cache, or tokenised into it now."""
    # The reader's version too: a fix to how lines are read or cleaned changes the ids of a line.
    identity = f"{TOKEN_CACHE_VERSION}|{READER_VERSION}|{corpus_fingerprint(corpus)}|{tokenizer_fingerprint(tokenizer)}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:24]
    directory = cache_dir("token-ids")
    if not (directory / f"{key}.ids.npy").is_file():
        directory.mkdir(parents=True, exist_ok=True)
        # Said, not logged: it can take a minute, and where no bar is drawn (a log) it would look like a hang.
        print(f"tokenising {counted(len(corpus), 'line')} once (cached for later runs in {directory})...",
              file=sys.stderr, flush=True)
        _write(directory, key, corpus, tokenizer)
    return TokenIds(directory, key)


def _write(directory: Path, key: str, corpus: Sequence[str], tokenizer) -> None:
    # By the largest id, not the vocabulary's size: added tokens' ids need not follow the vocabulary's.
    dtype = np.uint16 if max(tokenizer.get_vocab().values()) <= np.iinfo(np.uint16).max else np.uint32
    raw = own_part(directory / f"{key}.ids.raw")
    starts = np.zeros(len(corpus) + 1, dtype=np.int64)
    from tqdm.auto import tqdm

    try:
        with open(raw, "wb") as out:
            # disable=None: a progress bar on a terminal only (never in logs or tests' output).
            for first in tqdm(range(0, len(corpus), TOKENIZE_CHUNK), desc="tokenise the corpus once", unit="chunk",
                              disable=None):
                lines = [corpus[i] for i in range(first, min(first + TOKENIZE_CHUNK, len(corpus)))]
                encoded = tokenizer(lines, add_special_tokens=False, return_attention_mask=False,
                                    return_token_type_ids=False, verbose=False)["input_ids"]
                starts[first + 1:first + 1 + len(lines)] = [len(ids) for ids in encoded]
                out.write(np.fromiter((i for ids in encoded for i in ids), dtype=dtype).tobytes())
        np.cumsum(starts, out=starts)
        _save(directory / f"{key}.starts.npy", starts)
        _save(directory / f"{key}.documents.npy", document_starts(corpus))
        ids = np.fromfile(raw, dtype=dtype)
        _save(directory / f"{key}.ids.npy", ids)  # last: its presence means the cache is complete
    finally:
        raw.unlink(missing_ok=True)


def _save(path: Path, array: np.ndarray) -> None:
    with replace_atomically(path, "wb") as handle:  # np.save on a handle keeps the exact name
        np.save(handle, array, allow_pickle=False)


def document_starts(corpus: Sequence[str]) -> np.ndarray:
    """(lines,) bool: the first line, and each line with a blank line before it in the corpus file.

    The line index keeps only non-empty lines; a kept line that does not begin where the previous
    kept line ended had skipped (blank) lines before it. A corpus held in memory is one document."""
    starts = np.zeros(len(corpus), dtype=bool)
    starts[:1] = True
    path, offsets = getattr(corpus, "path", None), getattr(corpus, "offsets", None)
    if path is None or offsets is None:
        return starts
    with open(path, "rb") as handle:
        expected = None
        for i, offset in enumerate(offsets):
            starts[i] |= expected is not None and int(offset) != expected
            handle.seek(int(offset))
            expected = int(offset) + _line_and_ending_length(handle.readline())
    return starts


def _line_and_ending_length(raw: bytes) -> int:
    """Bytes up to the next line (the index ends a line at \\n, \\r\\n or a lone \\r)."""
    cut = raw.find(b"\r")
    if cut == -1:
        return len(raw)  # up to and with its \n (none on the last line of a file)
    return cut + (2 if raw[cut + 1:cut + 2] == b"\n" else 1)


def padded(rows: list[list[int]], pad_id: int, token_types: bool = False) -> dict[str, torch.Tensor]:
    """Rows of ids as one batch, padded on the right to the longest row as the tokenizer pads;
    ``token_types``: with the all-zero segment ids a single-sentence BERT input has."""
    ids = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, :len(row)] = torch.tensor(row, dtype=torch.long)
        attention[r, :len(row)] = 1
    features = {"input_ids": ids, "attention_mask": attention}
    if token_types:
        features["token_type_ids"] = torch.zeros_like(ids)
    return features


class SentenceTokenizer:
    """The encoder's ``tokenize`` for a step's rows, with the ids of rows that are corpus lines
    unchanged (SimCSE's two dropout views, UNA's anchors, any view an augmenter left as it was)
    read from the corpus's cache instead of tokenised again; only new texts are tokenised. The
    tensors are the tokenizer's own (truncation, special tokens, padding), which a test checks.
    """

    def __init__(self, tokenizer, max_seq_len: int, ids: TokenIds):
        self.tokenizer, self.ids = tokenizer, ids
        self.prefix, self.suffix = special_frame(tokenizer)
        self.room = max_seq_len - len(self.prefix) - len(self.suffix)  # text ids a row keeps
        self.token_types = "token_type_ids" in tokenizer.model_input_names
        self.pad_id = tokenizer.pad_token_id

    @staticmethod
    def fits(tokenizer) -> bool:
        """Whether a batch can be rebuilt from cached ids exactly: right-side padding and truncation
        (every BERT/RoBERTa-style tokenizer), a pad token, and single-sentence segment ids of 0 (Funnel,
        for one, gives its [CLS] segment id 2: its rows are tokenised per step)."""
        segments = tokenizer("a").get("token_type_ids") or ()
        return (tokenizer.padding_side == "right" and tokenizer.truncation_side == "right"
                and tokenizer.pad_token_id is not None and getattr(tokenizer, "pad_token_type_id", 0) == 0
                and not any(segments))

    def __call__(self, texts: list[str], lines: list[int | None]) -> dict[str, torch.Tensor]:
        """``lines[i]``: the corpus line that ``texts[i]`` is, or None for a text to tokenise now."""
        # Each distinct new text once: an augmenter's output often appears in more than one view.
        new = list(dict.fromkeys(text for text, line in zip(texts, lines, strict=True) if line is None))
        encoded = self.tokenizer(new, add_special_tokens=False, return_attention_mask=False,
                                 return_token_type_ids=False, verbose=False)["input_ids"] if new else []
        fresh = dict(zip(new, encoded, strict=True))
        rows = [self.prefix + (fresh[text] if line is None else self.ids.line(line).tolist())[:self.room] + self.suffix
                for text, line in zip(texts, lines, strict=True)]
        return padded(rows, self.pad_id, self.token_types)
