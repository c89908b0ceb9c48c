"""Readers for SentEval's data directory layout (the files exactly as SentEval's scripts leave them).

Every reader returns plain Python/numpy data and raises a one-line error naming the file (and the
line) when the content does not match the format. Sentences are whitespace-normalised the way
SentEval + SimCSE's batcher see them (``line.split()`` then ``" ".join``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cselab.errors import CselabError, counted

DOWNLOAD_HINT = "run `cselab data download --dest DIR` and pass --data-dir DIR"


class DataFormatError(CselabError, ValueError):
    """A SentEval file whose content does not match its format."""


class MissingDataError(FileNotFoundError):
    """A SentEval file that is not in the data directory."""


def why_absent(path: Path) -> str:
    """What a file that cannot be read is instead: a directory, or nothing at all."""
    return "is a directory, not a file" if path.is_dir() else "not found"


def require(path: Path) -> Path:
    if not path.is_file():
        raise MissingDataError(f"{path}: not found; the SentEval data is missing ({DOWNLOAD_HINT})")
    return path


def read_text(path: Path) -> str:
    """File content as text: UTF-8 (BOM dropped) when it decodes, else latin-1 (MR, TREC and CR ship latin-1 bytes)."""
    data = require(Path(path)).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def normalize(sentence: str) -> str:
    """SentEval tokenises by whitespace and SimCSE's batcher joins with one space."""
    return " ".join(sentence.split())


@dataclass
class SentencePairs:
    """Scored sentence pairs (STS, SICK-R, STS-B)."""

    left: list[str]
    right: list[str]
    gold: np.ndarray

    def __len__(self) -> int:
        return len(self.gold)


@dataclass
class LabelledSentences:
    """Single sentences with integer class labels (MR, CR, SUBJ, MPQA, SST-2, TREC)."""

    sentences: list[str]
    labels: np.ndarray


@dataclass
class LabelledPairs:
    """Sentence pairs with integer labels (MRPC)."""

    left: list[str]
    right: list[str]
    labels: np.ndarray


def _float(value: str, path: Path, number: int, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise DataFormatError(f"{path}:{number}: {what} {value!r} is not a number") from None


def read_sts_subset(input_path: Path, gold_path: Path) -> SentencePairs:
    """STS12-16 ``STS.input.<subset>.txt`` (sentence TAB sentence) and ``STS.gs.<subset>.txt`` (one score a line).

    A blank gold line marks an unscored pair: the pair is skipped and the files stay aligned.
    """
    inputs = read_text(input_path).splitlines()
    golds = read_text(gold_path).splitlines()
    if len(inputs) != len(golds):
        raise DataFormatError(f"{gold_path}: {counted(len(golds), 'gold line')} for "
                              f"{counted(len(inputs), 'sentence pair')} in {input_path.name}")
    left, right, scores = [], [], []
    for number, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        if not gold.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise DataFormatError(f"{input_path}:{number}: expected two tab-separated sentences, "
                                  f"found {counted(len(fields), 'field')}")
        scores.append(_float(gold.strip(), gold_path, number, "gold score"))
        left.append(normalize(fields[0]))
        right.append(normalize(fields[1]))
    return SentencePairs(left, right, np.asarray(scores, dtype=np.float64))


def read_stsb(path: Path) -> SentencePairs:
    """STS-B ``sts-{train,dev,test}.csv``: tab-separated, score in column 5, sentences in 6 and 7.

    Some lines carry extra columns (the source of the pair) after the second sentence; they are ignored.
    Quotes are ordinary characters here (no csv quoting).
    """
    left, right, scores = [], [], []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 7:
            raise DataFormatError(f"{path}:{number}: expected at least 7 tab-separated columns, found {len(fields)}")
        scores.append(_float(fields[4], path, number, "score (column 5)"))
        left.append(normalize(fields[5]))
        right.append(normalize(fields[6]))
    return SentencePairs(left, right, np.asarray(scores, dtype=np.float64))


def read_sick(path: Path) -> SentencePairs:
    """SICK ``SICK_{train,trial,test_annotated}.txt``: header line, then pair_ID, A, B, relatedness, entailment."""
    lines = read_text(path).splitlines()
    left, right, scores = [], [], []
    for number, line in enumerate(lines, start=1):
        if number == 1 or not line.strip():
            continue  # header: pair_ID sentence_A sentence_B relatedness_score entailment_judgment
        fields = line.split("\t")
        if len(fields) < 4:
            raise DataFormatError(f"{path}:{number}: expected at least 4 tab-separated columns, found {len(fields)}")
        scores.append(_float(fields[3], path, number, "relatedness score (column 4)"))
        left.append(normalize(fields[1]))
        right.append(normalize(fields[2]))
    return SentencePairs(left, right, np.asarray(scores, dtype=np.float64))


def read_binary(positive: Path, negative: Path) -> LabelledSentences:
    """MR/CR/SUBJ/MPQA: one sentence a line, label 1 for the first file, 0 for the second."""
    sentences, labels = [], []
    for path, label in ((positive, 1), (negative, 0)):
        for line in read_text(path).splitlines():
            if line.strip():
                sentences.append(normalize(line))
                labels.append(label)
    return LabelledSentences(sentences, np.asarray(labels, dtype=np.int64))


def read_sst(path: Path) -> LabelledSentences:
    """SST ``binary/sentiment-{train,dev,test}``: sentence TAB label (0/1)."""
    sentences, labels = [], []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        sentence, sep, label = line.rpartition("\t")
        if not sep or label.strip() not in ("0", "1"):
            raise DataFormatError(f"{path}:{number}: expected 'sentence<TAB>0|1', found {line[:60]!r}")
        sentences.append(normalize(sentence))
        labels.append(int(label))
    return LabelledSentences(sentences, np.asarray(labels, dtype=np.int64))


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


def read_trec(path: Path) -> LabelledSentences:
    """TREC ``train_5500.label`` / ``TREC_10.label``: ``COARSE:fine question``; the coarse class is the label."""
    sentences, labels = [], []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        target, _, question = line.strip().partition(" ")
        coarse = target.split(":", 1)[0]
        if coarse not in TREC_CLASSES or ":" not in target:
            raise DataFormatError(f"{path}:{number}: expected 'COARSE:fine question' with COARSE in "
                                  f"{', '.join(TREC_CLASSES)}, found {target!r}")
        sentences.append(normalize(question))
        labels.append(TREC_CLASSES.index(coarse))
    return LabelledSentences(sentences, np.asarray(labels, dtype=np.int64))


def read_mrpc(path: Path) -> LabelledPairs:
    """MRPC ``msr_paraphrase_{train,test}.txt``: header, then Quality, #1 ID, #2 ID, #1 String, #2 String."""
    left, right, labels = [], [], []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if number == 1 or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 5 or fields[0].strip() not in ("0", "1"):
            raise DataFormatError(f"{path}:{number}: expected 'label<TAB>id<TAB>id<TAB>sentence<TAB>sentence' "
                                  "with label 0/1")
        labels.append(int(fields[0]))
        left.append(normalize(fields[3]))
        right.append(normalize(fields[4]))
    return LabelledPairs(left, right, np.asarray(labels, dtype=np.int64))


# --- Your own evaluation data (``cselab eval --sts-file / --classification-file``, ``train.select_on: sts:PATH``).
# Column names follow sentence-transformers' and MTEB's datasets: sentence1, sentence2, score; text, label.
PAIR_COLUMNS = ("sentence1", "sentence2", "score")
LABEL_COLUMNS = ("text", "label")


def _table_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, fields) of a .csv (quoted fields, Python's csv), .tsv/.txt (tab-separated) or .jsonl file;
    a JSONL row is its object's values in ``keys`` order, checked by the caller."""
    import csv
    import io

    text = read_text(Path(path))
    if Path(path).suffix.lower() == ".csv":
        reader = csv.reader(io.StringIO(text))
        return [(reader.line_num, row) for row in reader if any(field.strip() for field in row)]
    return [(number, line.split("\t")) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _jsonl_rows(path: Path, keys: tuple[str, ...]) -> list[tuple[int, list]]:
    import json

    rows = []
    for number, line in enumerate(read_text(Path(path)).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise DataFormatError(f"{path}:{number}: not a JSON object") from None
        if not isinstance(record, dict) or any(key not in record for key in keys):
            raise DataFormatError(f"{path}:{number}: expected a JSON object with the keys {', '.join(keys)}")
        rows.append((number, [record[key] for key in keys]))
    return rows


def _named_columns(header: list[str], names: tuple[str, ...]) -> list[int] | None:
    """The positions of ``names`` in a header row (None when the row is not a header naming them all)."""
    lowered = [field.strip().lower() for field in header]
    return [lowered.index(name) for name in names] if all(name in lowered for name in names) else None


def read_pairs_file(path: Path) -> SentencePairs:
    """Scored sentence pairs from a user's file: CSV, TSV or JSONL with two sentences and a score.

    CSV/TSV: an optional header naming ``sentence1, sentence2, score`` (in any order, other columns
    ignored); without it the first three columns are sentence, sentence, score. JSONL: one object a
    line with those three keys. Any numeric score range (0-5, 0-1, 1-10): only the ranking counts.
    """
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        rows, columns = _jsonl_rows(path, PAIR_COLUMNS), [0, 1, 2]
    else:
        rows = _table_rows(path)
        columns = _named_columns(rows[0][1], PAIR_COLUMNS) if rows else None
        rows, columns = (rows[1:], columns) if columns else (rows, [0, 1, 2])
    left, right, scores = [], [], []
    for number, fields in rows:
        if len(fields) <= max(columns):
            raise DataFormatError(f"{path}:{number}: expected sentence, sentence and score columns, "
                                  f"found {counted(len(fields), 'column')}")
        first, second, score = (fields[i] for i in columns)
        if not isinstance(first, str) or not isinstance(second, str):
            raise DataFormatError(f"{path}:{number}: the two sentences must be strings")
        scores.append(_float(str(score), path, number, "score"))
        left.append(normalize(first))
        right.append(normalize(second))
    if len(scores) < 2:
        raise DataFormatError(f"{path}: {counted(len(scores), 'scored pair')}; a correlation needs at least 2")
    if len(set(scores)) == 1:  # Spearman against a constant is undefined: a table would show only "-"
        raise DataFormatError(f"{path}: every pair has the score {scores[0]:g}; a correlation needs scores "
                              f"that differ")
    return SentencePairs(left, right, np.asarray(scores, dtype=np.float64))


def read_labelled_file(path: Path) -> tuple[LabelledSentences, list[str]]:
    """Labelled sentences from a user's file (CSV, TSV or JSONL: ``text`` and ``label``, a header
    optional in CSV/TSV) and the label names; the labels are numbered in sorted order."""
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        rows, columns = _jsonl_rows(path, LABEL_COLUMNS), [0, 1]
    else:
        rows = _table_rows(path)
        columns = _named_columns(rows[0][1], LABEL_COLUMNS) if rows else None
        rows, columns = (rows[1:], columns) if columns else (rows, [0, 1])
    sentences, labels = [], []
    for number, fields in rows:
        if len(fields) <= max(columns) or not str(fields[columns[1]]).strip():
            raise DataFormatError(f"{path}:{number}: expected a text and a label column")
        sentences.append(normalize(str(fields[columns[0]])))
        labels.append(str(fields[columns[1]]).strip())
    names = sorted(set(labels))
    if len(names) < 2:
        raise DataFormatError(f"{path}: {counted(len(names), 'label')} found; a classification needs at least 2")
    index = {name: i for i, name in enumerate(names)}
    return LabelledSentences(sentences, np.asarray([index[label] for label in labels], dtype=np.int64)), names
