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


def test_a_model_with_pickled_weights_only_is_a_one_line_error_with_the_conversion(tmp_path, capsys):
    from cselab.cli import main

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert"}')
    (model / "pytorch_model.bin").write_bytes(b"not loaded")
    inputs = tmp_path / "in.txt"
    inputs.write_text("a sentence\n")
    assert main(["encode", str(model), "--in", str(inputs), "--out", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pytorch_model.bin" in err and "safe_serialization=True" in err
