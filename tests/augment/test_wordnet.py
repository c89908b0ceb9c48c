"""Installing Debian's WordNet for NLTK, and the cached look-ups."""
import os
from pathlib import Path

import pytest

from cselab.augment import build_augmenter, wordnet
from cselab.augment.base import AugmenterUnavailable


def test_lexnames_is_the_standard_45_line_list():
    lines = wordnet.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0].split() == ["00", "adj.all", "3"] and lines[44].split() == ["44", "adj.ppl", "3"]
    assert lines[3].split() == ["03", "noun.Tops", "1"] and lines[29].split() == ["29", "verb.body", "2"]
    assert [int(line.split()[0]) for line in lines] == list(range(45))


def test_missing_debian_files_explain_the_install(tmp_path):
    with pytest.raises(AugmenterUnavailable, match="apt-get install wordnet-base wordnet-sense-index"):
        wordnet.setup_wordnet(tmp_path / "root", source=tmp_path / "nowhere")


def test_root_honours_nltk_data(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", f"{tmp_path}{os.pathsep}/elsewhere")
    assert wordnet.nltk_data_root() == tmp_path
    monkeypatch.delenv("NLTK_DATA")
    assert wordnet.nltk_data_root() == Path("~/.cache/cselab/nltk_data").expanduser()


@pytest.mark.skipif(not (wordnet.DEBIAN_WORDNET / "index.sense").is_file(), reason="Debian WordNet not installed")
def test_setup_copies_the_database_and_writes_lexnames(tmp_path):
    target = wordnet.setup_wordnet(tmp_path)
    assert target == tmp_path / "corpora" / "wordnet"
    for name in ("data.noun", "index.sense", "noun.exc", "cntlist.rev"):
        assert not (target / name).is_symlink()
        assert (target / name).read_bytes() == (wordnet.DEBIAN_WORDNET / name).read_bytes()
    assert (target / "lexnames").read_text() == wordnet.lexnames_text()
    assert not list(tmp_path.joinpath("corpora").glob(".wordnet-*"))  # no staging left behind
    assert wordnet.setup_wordnet(tmp_path) == target  # idempotent


def test_nltk_reader_reads_the_installed_copy(wordnet_ready):
    """The reader is NLTK's WordNetCorpusReader over the directory setup_wordnet made."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    reader = wordnet.reader()
    assert isinstance(reader, WordNetCorpusReader)
    assert (wordnet.wordnet_dir() / "lexnames").read_text() == wordnet.lexnames_text()
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
