"""Corpus text encodings: UTF-8 with or without a BOM, and UTF-16 (LE/BE, with its BOM, plain or
gzipped) decoded to the same sentences; any other encoding is one error naming the file and line
(exit 2 from the command line), never read as garbage."""
from __future__ import annotations

import gzip

import pytest

from cselab.data.corpus import CorpusError, iter_corpus
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
    assert set(stats.cleaned) <= {"bom"}  # nothing garbled: at most the BOM was dropped


REFUSED = [
    ("latin1.txt", TEXT.encode("latin-1", errors="replace"), 1, "not valid UTF-8 (byte 0xE8"),
    ("cp1252.txt", "First line.\nIt\u2019s the second.\n".encode("cp1252"), 2, "not valid UTF-8 (byte 0x92"),
    ("latin1.jsonl", '{"text": "ok"}\n{"text": "d\u00e9j\u00e0 vu"}\n'.encode("latin-1"), 2, "not valid UTF-8"),
    ("utf32.txt", TEXT.encode("utf-32"), 1, "UTF-32"),
    ("utf32-be.txt", b"\x00\x00\xfe\xff" + TEXT.encode("utf-32-be"), 1, "UTF-32"),
    ("utf16-no-bom.txt", "An English line.\nAnother one.\n".encode("utf-16-le"), 1, "without a byte-order mark"),
    ("utf32-no-bom.txt.gz", gzip.compress("An English line.\nAnother one.\n".encode("utf-32-le")), 1,
     "without a byte-order mark"),
    ("utf16-odd.txt", TEXT.encode("utf-16") + b"!", 4, "UTF-16 text ends in the middle of a character"),
]


@pytest.mark.parametrize(("name", "data", "line", "fragment"), REFUSED, ids=[case[0] for case in REFUSED])
def test_any_other_encoding_is_one_error_naming_file_and_line(tmp_path, name, data, line, fragment):
    path = tmp_path / name
    path.write_bytes(data)
    for read in (lambda: read_corpus(str(path)), lambda: list(iter_corpus(str(path)))):
        with pytest.raises(CorpusError) as info:
            read()
        message = str(info.value)
        assert message.startswith(f"{path}:{line}: ") and fragment in message and "\n" not in message


def test_the_command_line_refuses_a_latin1_corpus_in_one_line(tmp_path, capsys, monkeypatch):
    from cselab.cli import main

    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes(TEXT.encode("latin-1", errors="replace"))
    out_dir = tmp_path / "run"
    assert main(["train", "--corpus", str(corpus), "--output-dir", str(out_dir), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"cselab train: error: {corpus}:1: not valid UTF-8") and "\n" not in err
    assert not out_dir.exists()

