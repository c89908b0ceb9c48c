"""The WordNet shipped with cselab: unpacking it for NLTK, and the cached look-ups."""
import os
import tarfile
from pathlib import Path

import pytest

from cselab import wordnet_data
from cselab.augment import build_augmenter, wordnet
from cselab.augment.base import AugmenterUnavailable


def test_the_archive_holds_the_database_lexnames_and_licence():
    with tarfile.open(wordnet_data.PACKED_ARCHIVE, "r:xz") as archive:
        names = {member.name for member in archive.getmembers() if member.isfile()}
        lexnames = archive.extractfile("wordnet/lexnames").read().decode().splitlines()
        licence = archive.extractfile("wordnet/LICENSE").read().decode()
    assert names == {f"wordnet/{name}" for name in (*wordnet_data.DATABASE_FILES, "lexnames", "LICENSE")}
    assert len(lexnames) == 45 and [int(line.split()[0]) for line in lexnames] == list(range(45))
    assert lexnames[3].split() == ["03", "noun.Tops", "1"] and lexnames[44].split() == ["44", "adj.ppl", "3"]
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in licence


def test_unpack_is_atomic_idempotent_and_needs_no_system_files(tmp_path):
    target = wordnet.setup_wordnet(tmp_path)
    assert target == tmp_path / "corpora" / "wordnet"
    assert wordnet_data.is_complete(target)
    assert (target / "data.noun").read_bytes().startswith(b"  1 This software and database")
    assert not list(tmp_path.joinpath("corpora").glob(".wordnet-*"))  # no staging left behind
    before = (target / "data.noun").stat().st_mtime_ns
    assert wordnet.setup_wordnet(tmp_path) == target and (target / "data.noun").stat().st_mtime_ns == before
    (target / "index.sense").unlink()  # an incomplete copy (e.g. an interrupted older install) is redone
    assert wordnet.setup_wordnet(tmp_path) == target and wordnet_data.is_complete(target)


@pytest.mark.skipif(not Path("/usr/share/wordnet/data.noun").is_file(), reason="Debian WordNet not installed")
def test_the_shipped_database_is_debians_byte_for_byte(tmp_path):
    target = wordnet.setup_wordnet(tmp_path)
    for name in wordnet_data.DATABASE_FILES:
        assert (target / name).read_bytes() == Path("/usr/share/wordnet", name).read_bytes(), name


def test_a_missing_archive_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(wordnet_data, "PACKED_ARCHIVE", tmp_path / "gone.tar.xz")
    with pytest.raises(AugmenterUnavailable, match="gone.tar.xz: the WordNet archive shipped with cselab is missing"):
        wordnet.setup_wordnet(tmp_path / "root")


def test_root_honours_nltk_data(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", f"{tmp_path}{os.pathsep}/elsewhere")
    assert wordnet_data.nltk_data_root() == tmp_path
    monkeypatch.delenv("NLTK_DATA")
    assert wordnet_data.nltk_data_root() == Path("~/.cache/cselab/nltk_data").expanduser()


def test_nltk_reader_reads_the_installed_copy(wordnet_ready):
    """The reader is NLTK's WordNetCorpusReader over the directory setup_wordnet made."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    reader = wordnet.reader()
    assert isinstance(reader, WordNetCorpusReader)
    assert "car.n.01" in {s.name() for s in reader.synsets("automobile")}
    assert reader.synset("dog.n.01").lexname() == "noun.animal"
    assert reader.synset("run.v.01").lexname() == "verb.motion"


def test_lookups(wordnet_ready):
    assert "automobile" in wordnet.synonyms("car") and "car" not in wordnet.synonyms("car")
    assert "bad" in wordnet.antonyms("good") and "unhappy" in wordnet.antonyms("happy", pos="ADJ")
    assert "motor vehicle" in wordnet.hypernyms("car", pos="n")
    assert "ambulance" in wordnet.hyponyms("car", pos="n")
    assert wordnet.synonyms("qwzxv") == []
    assert wordnet.synonyms("car", senses=1) == ["auto", "automobile", "machine", "motorcar"]  # car.n.01 only
    assert set(wordnet.synonyms("car", senses=1)) < set(wordnet.synonyms("car"))
    with pytest.raises(ValueError, match="part of speech"):
        wordnet.synonyms("car", pos="X")


def test_substitution_augmenters(wordnet_ready):
    sentence = "The happy driver parked the car near the house."
    out = build_augmenter("antonym_substitution").augment([sentence], seed=0)[0]
    assert out == "The unhappy driver parked the car near the house."
    hyper = build_augmenter("hypernym_replacement", ratio=1.0).augment([sentence], seed=0)[0]
    assert hyper != sentence and "The" in hyper
    hypo = build_augmenter("hyponym_replacement").augment([sentence], seed=0)[0]
    assert hypo != sentence
    syn = build_augmenter("synonym_substitution", ratio=1.0).augment(["The car."], seed=0)[0]
    assert syn.startswith("The ") and syn.endswith(".") and syn != "The car."
    assert build_augmenter("synonym_substitution").augment(["Car."], seed=0)[0][0].isupper()  # case kept
    first_sense = build_augmenter("synonym_substitution", ratio=1.0, senses=1)
    assert {first_sense.augment(["car"], seed=k)[0] for k in range(20)} <= {"auto", "automobile", "machine", "motorcar"}
