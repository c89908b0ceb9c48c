"""Corpus inputs: text, gzip, CSV/TSV/JSONL columns; empty lines skipped and counted."""
import gzip
import json

import pytest

from cselab.data.corpus import CorpusError
from cselab.data.indexed import read_corpus


def test_text_and_gzip(tmp_path):
    lines = "first sentence\n\n   \nsecond sentence\n"
    (tmp_path / "a.txt").write_text(lines)
    with gzip.open(tmp_path / "a.txt.gz", "wt") as handle:
        handle.write(lines)
    for name in ("a.txt", "a.txt.gz"):
        sentences, stats = read_corpus(str(tmp_path / name))
        assert list(sentences) == ["first sentence", "second sentence"]
        assert stats.skipped["empty"] == 2


def test_columns(tmp_path):
    (tmp_path / "a.csv").write_text('id,text\n1,"hello, world"\n2,second one\n')
    (tmp_path / "a.tsv").write_text("sent\tlabel\nhello world\t1\nsecond one\t0\n")
    (tmp_path / "a.jsonl").write_text(json.dumps({"sentence": "hello world"}) + "\n"
                                      + json.dumps({"sentence": "second one"}) + "\n")
    assert list(read_corpus(str(tmp_path / "a.csv"))[0]) == ["hello, world", "second one"]
    assert list(read_corpus(str(tmp_path / "a.tsv"), column="sent")[0]) == ["hello world", "second one"]
    assert list(read_corpus(str(tmp_path / "a.jsonl"), column="sentence")[0]) == ["hello world", "second one"]
    with pytest.raises(CorpusError, match="a.jsonl:1"):
        read_corpus(str(tmp_path / "a.jsonl"))  # default key "text" is absent


def test_missing_file_named():
    with pytest.raises(CorpusError, match="nope.txt"):
        read_corpus("nope.txt")


def test_builtin_default_corpus():
    sentences, stats = read_corpus("builtin:wordnet-glosses", max_sentences=500)
    assert len(sentences) == 500 and all(len(s.split()) >= 5 for s in sentences)
