"""The on-disk line index gives exactly the sentences the in-memory reader gives."""
from hypothesis import given, settings
from hypothesis import strategies as st

from cselab.data.corpus import CorpusStats, iter_corpus
from cselab.data.indexed import IndexedTextCorpus


def _both(tmp_path, data: bytes, monkeypatch):
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    stats = CorpusStats(str(path))
    return list(iter_corpus(str(path), stats=stats)), IndexedTextCorpus(path), stats


def test_mixed_line_endings(tmp_path, monkeypatch):
    raw = b"\xef\xbb\xbfone\r\ntwo\rthree\n\n  \nfo\x00ur\nfi\xc3\xa9ve"
    memory, indexed, stats = _both(tmp_path, raw, monkeypatch)
    assert list(indexed) == memory == ["one", "two", "three", "four", "fiéve"]
    assert indexed.stats.skipped == stats.skipped and indexed.stats.kept == stats.kept == 5
    assert indexed[1] == "two" and indexed[-1] == "fiéve"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc d", b"\r", b"\n", b"\r\n", b" ", b"\x00", "é".encode()]),
                max_size=30))
def test_same_sentences_as_memory_reader(tmp_path_factory, data):
    import os

    tmp = tmp_path_factory.mktemp("idx")
    os.environ["CSELAB_CACHE"] = str(tmp / "cache")
    path = tmp / "c.txt"
    path.write_bytes(b"".join(data))
    memory = list(iter_corpus(str(path)))
    assert list(IndexedTextCorpus(path)) == memory


def test_every_format_is_spooled_once_and_read_lazily(tmp_path, monkeypatch):
    """CSV, JSONL and .gz corpora end up as the same lazily read corpus as a text file, with their counts."""
    import gzip
    import json

    from cselab.data.indexed import IndexedTextCorpus, read_corpus

    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in
                                               ["first  one", "", "second\tone", "third one"]) + "\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("first  one\n\nsecond\tone\nthird one\n")
    for name in ("a.jsonl", "b.txt.gz"):
        sentences, stats = read_corpus(str(tmp_path / name))
        assert isinstance(sentences, IndexedTextCorpus)
        assert list(sentences) == ["first one", "second one", "third one"]
        assert stats.kept == 3 and stats.skipped["empty"] == 1
        sample, _ = read_corpus(str(tmp_path / name), max_sentences=2, seed=1)
        assert len(sample) == 2 and set(sample) <= set(sentences)
    spooled = sorted((tmp_path / "cache" / "spooled").glob("*.txt"))
    assert len(spooled) == 2  # read again: the cached files are reused, not written anew
    mtimes = [p.stat().st_mtime_ns for p in spooled]
    read_corpus(str(tmp_path / "a.jsonl"))
    assert [p.stat().st_mtime_ns for p in spooled] == mtimes
