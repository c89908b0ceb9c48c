"""Bad corpus input is cleaned or skipped and counted, never a crash; nothing valid is dropped; bytes
that are not UTF-8 are one error naming the file and line."""
from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cselab.data.corpus import MAX_CHARS, CorpusError, iter_corpus
from cselab.data.indexed import read_corpus


def test_every_kind_of_dirty_line_is_cleaned_or_skipped_and_counted(tmp_path):
    data = (b"\xef\xbb\xbffirst line after a BOM\r\n"       # BOM at the start, Windows ending
            b"second\r"                                      # old Mac ending
            b"third \xe2\x80\xa6 ellipsis\n"                  # multi-byte UTF-8 (U+2026)
            b"   \t  \n"                                     # whitespace only
            b"\x00\x00\x00\n"                                # only NUL bytes
            b"nul\x00inside\n"                               # a NUL inside
            b"zero\xef\xbb\xbfwidth inside\n"                # a BOM (U+FEFF) inside a line
            b"bell\x07 and escape\x1b\n"                     # control characters
            + b"long " * 200_000 + b"\n"                     # a 1 MB line
            b"last line without an ending")
    path = tmp_path / "dirty.txt"
    path.write_bytes(data)
    sentences, stats = read_corpus(str(path))
    sentences = list(sentences)  # a file-backed sequence
    assert sentences[:3] == ["first line after a BOM", "second", "third \u2026 ellipsis"]
    assert sentences[3:6] == ["nulinside", "zerowidth inside", "bell and escape"]
    assert len(sentences[6]) == MAX_CHARS and sentences[6].startswith("long long")
    assert sentences[7] == "last line without an ending"
    assert len(sentences) == stats.kept == 8
    assert dict(stats.skipped) == {"empty": 2}
    assert dict(stats.cleaned) == {"bom": 2, "nul_bytes": 2, "control_chars": 1, "truncated_long_line": 1}
    assert "skipped: empty 2" in stats.summary()


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".csv", ".jsonl"])
def test_a_line_that_is_not_utf8_is_one_error_naming_file_and_line(tmp_path, suffix):
    lines = ['{"text": "fine first line"}', '{"text": "second fine line"}', '{"text": "caf\xe9 au lait"}'] \
        if suffix == ".jsonl" else ["text", "fine first line", "caf\xe9 au lait"] if suffix == ".csv" \
        else ["fine first line", "second fine line", "caf\xe9 au lait"]
    data = "\r\n".join(lines).encode("latin-1") + b"\nlast line\n"
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with pytest.raises(CorpusError) as info:
        read_corpus(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:3: not valid UTF-8 (byte 0xE9 at byte ") and "\n" not in message
    assert "iconv" in message


def test_all_three_line_endings_mixed_give_the_same_lines(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"a one\r\nb two\rc three\nd four\r\r\ne five")
    assert list(read_corpus(str(path))[0]) == ["a one", "b two", "c three", "d four", "e five"]


def test_csv_rows_missing_the_column_or_unreadable_are_skipped_and_counted(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("id,text\n1,first sentence\n2\n3,\"" + "x" * 200_000 + "\"\n4,last sentence\r\n", encoding="utf-8")
    sentences, stats = read_corpus(str(path))
    sentences = list(sentences)  # a file-backed sequence
    assert sentences == ["first sentence", "last sentence"]
    assert stats.skipped["missing_column"] == 1 and stats.skipped["unreadable_row"] == 1


def test_jsonl_records_that_are_not_strings_or_not_json_are_skipped_and_counted(tmp_path):
    path = tmp_path / "records.jsonl"
    lines = [json.dumps({"text": "a real sentence"}), json.dumps({"text": 5}), json.dumps({"text": ["a", "b"]}),
             json.dumps({"text": None}), json.dumps(["not", "an", "object"]), '{"text": "cut sho',
             json.dumps({"text": "another sentence"})]
    path.write_text("\n".join(lines), encoding="utf-8")
    sentences, stats = read_corpus(str(path))
    sentences = list(sentences)  # a file-backed sequence
    assert sentences == ["a real sentence", "another sentence"]
    assert stats.skipped == {"not_a_string": 2, "empty": 1, "not_a_json_object": 1, "invalid_json": 1}


def test_jsonl_without_the_column_names_file_and_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps({"sentence": "no text key"}) + "\n")
    with pytest.raises(CorpusError, match=r"records.jsonl:2: no key 'text'"):
        read_corpus(str(path))


def test_truncated_gzip_is_one_clear_error_naming_file_and_line(tmp_path):
    lines = "".join(f"sentence number {i} of a compressed corpus\n" for i in range(5000))
    whole = gzip.compress(lines.encode())
    path = tmp_path / "corpus.txt.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CorpusError) as info:
        read_corpus(str(path))
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:") and "truncated or corrupt" in message
    path.write_bytes(b"this is not gzip data at all")
    with pytest.raises(CorpusError, match="corpus.txt.gz:1: gzip data is truncated or corrupt"):
        read_corpus(str(path))


def test_too_few_sentences_says_what_was_skipped(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"\n \n\x00\nonly one\n")
    with pytest.raises(CorpusError, match="needs at least 2 sentences, found 1 .*skipped: empty 3"):
        read_corpus(str(path))


# --- fuzzing ------------------------------------------------------------------------------------

ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
# Text a person could mean as a sentence: no control characters, no surrogates, no BOM.
VALID_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff"), max_size=80)
# Junk that is still UTF-8: control characters, NULs, BOMs, odd whitespace (no line ends).
JUNK = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80).map(
    lambda t: t.encode("utf-8").replace(b"\n", b"").replace(b"\r", b""))
NOT_UTF8 = st.sampled_from([b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(data: bytes, suffix: str) -> list[str] | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            sentences, stats = read_corpus(str(path))
            sentences = list(sentences)  # a file-backed sequence
        except CorpusError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return None
        assert stats.kept == len(sentences) >= 2
        assert list(iter_corpus(str(path))) == sentences  # streaming gives the same lines
        return sentences


@FUZZ
@given(data=st.binary(max_size=2000), suffix=st.sampled_from([".txt", ".txt.gz", ".csv", ".tsv", ".jsonl"]))
def test_arbitrary_bytes_never_crash_the_reader(data, suffix):
    result = _read(data, suffix)
    if result is not None:
        assert all(s and s == " ".join(s.split()) and "\x00" not in s for s in result)


@FUZZ
@given(records=st.lists(st.tuples(st.booleans(), VALID_TEXT, JUNK, ENDINGS), max_size=40),
       bom=st.booleans(), compress=st.booleans())
def test_every_valid_line_is_kept_in_order_whatever_surrounds_it(records, bom, compress):
    data = b"\xef\xbb\xbf" if bom else b""
    expected = []
    for is_valid, text, junk, ending in records:
        data += (text.encode("utf-8") if is_valid else junk) + ending
        if is_valid and text.split():
            expected.append(" ".join(text.split()))
    result = _read(gzip.compress(data) if compress else data, ".txt.gz" if compress else ".txt")
    if result is None:
        assert len(expected) < 2
        return
    iterator = iter(result)
    assert all(any(line == got for got in iterator) for line in expected), "a valid line was dropped or reordered"
    assert len(result) <= len(records)


@FUZZ
@given(records=st.lists(st.tuples(VALID_TEXT.filter(bool), ENDINGS), min_size=1, max_size=30), data=st.data(),
       compress=st.booleans())
def test_the_first_line_that_is_not_utf8_is_named(records, data, compress):
    bad_line = data.draw(st.integers(1, len(records)))
    lines = [text.encode("utf-8") + ending for text, ending in records]
    text, ending = records[bad_line - 1]
    cut = data.draw(st.integers(0, len(text)))
    lines[bad_line - 1] = text[:cut].encode("utf-8") + data.draw(NOT_UTF8) + text[cut:].encode("utf-8") + ending
    payload = b"".join(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("fuzz.txt.gz" if compress else "fuzz.txt")
        path.write_bytes(gzip.compress(payload) if compress else payload)
        with pytest.raises(CorpusError, match=rf"^{path}:{bad_line}: not valid UTF-8"):
            read_corpus(str(path))
