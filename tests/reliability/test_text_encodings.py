"""Corpus text encodings: UTF-8 with or without a BOM, and UTF-16 (LE/BE, with its BOM, plain or
gzipped) decoded to the same sentences; never read as garbage."""
from __future__ import annotations

import gzip

import pytest

from cselab.data.corpus import iter_corpus
from cselab.data.indexed import read_corpus

LINES = ["Première phrase avec des accents.", "A second line, in English.", "第三行：日本語と中文のテキスト。"]
TEXT = "\r\n".join(LINES) + "\n"


@pytest.mark.parametrize(("name", "data"), [
    ("utf8.txt", TEXT.encode("utf-8")),
    ("utf8-bom.txt", b"\xef\xbb\xbf" + TEXT.encode("utf-8")),
    ("utf16.txt", TEXT.encode("utf-16")),  # Python writes the BOM of the machine's byte order
    ("utf16-le.txt", b"\xff\xfe" + TEXT.encode("utf-16-le")),
    ("utf16-be.txt", b"\xfe\xff" + TEXT.encode("utf-16-be")),
    ("utf16.txt.gz", gzip.compress(b"\xff\xfe" + TEXT.encode("utf-16-le"))),
])
def test_every_encoding_gives_the_same_sentences(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    sentences, stats = read_corpus(str(path))
    assert list(sentences) == LINES and list(iter_corpus(str(path))) == LINES
    assert "invalid_utf8" not in stats.cleaned

