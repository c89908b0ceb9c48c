"""UNA's three steps on a synthetic Zipfian corpus: TF-IDF, replacement probabilities, window sampling."""
from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from cselab.augment import AUGMENTERS, build_augmenter
from cselab.augment.una import fit_tfidf, replacement_probabilities, tokenize


def _seeded_plans(augmenter, sentences, seed=0):
    return [augmenter.plan(s, random.Random(seed * 100_003 + i)) for i, s in enumerate(sentences)]


# Step 1 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["ratio", "log"])
def test_max_tfidf_matches_a_direct_computation(mode):
    docs = ["The cat sat on the mat.", "A dog sat.", "the cat, the cat!", "Zebra"]
    stats = fit_tfidf(docs, mode)
    tokenised = [[t for _, _, t in tokenize(d.lower())] for d in docs]
    df = Counter(t for doc in tokenised for t in set(doc))
    expected = {}
    for doc in tokenised:
        for term, count in Counter(doc).items():
            tf = count / len(doc)
            score = (math.log1p(tf) if mode == "log" else tf) * math.log(len(docs) / df[term])
            expected[term] = max(expected.get(term, 0.0), score)
    assert set(stats.vocabulary) == set(expected)
    for term, column in stats.vocabulary.items():
        assert stats.max_tfidf[column] == pytest.approx(expected[term])
        assert stats.idf[column] == pytest.approx(math.log(len(docs) / df[term]))
    # The vocabulary is sorted by max TF-IDF, highest first, and ranks invert that order.
    ordered = [expected[t] for t in stats.terms_by_rank]
    assert ordered == sorted(ordered, reverse=True)
    assert stats.terms_by_rank[0] == "zebra"  # a one-word sentence of a unique word: tf 1, highest idf
    for term, column in stats.vocabulary.items():
        assert stats.terms_by_rank[stats.rank[column]] == term


def test_fit_keeps_counts_sparse_and_rejects_an_empty_corpus(corpus):
    stats = fit_tfidf(corpus)
    assert stats.num_documents == len(corpus)
    assert stats.cumulative[-1] == pytest.approx(stats.max_tfidf.sum())
    with pytest.raises(ValueError, match="no tokens"):
        fit_tfidf(["", "   "])


# Step 2 --------------------------------------------------------------------------------------

def _mean_probability_and_replaced_share(corpus, p):
    augmenter = build_augmenter("una", p=p, radius=40).fit(corpus)
    plans = _seeded_plans(augmenter, corpus[:1500])
    mean_probability = np.mean([np.mean(plan.probabilities) for plan in plans])
    replaced_share = sum(len(plan.chosen) for plan in plans) / sum(len(plan.tokens) for plan in plans)
    return mean_probability, replaced_share


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_mean_replacement_probability_is_close_to_p(corpus, p):
    mean_probability, replaced_share = _mean_probability_and_replaced_share(corpus, p)
    assert abs(mean_probability - p) < 0.05
    assert abs(replaced_share - p) < 0.05


def test_the_cap_at_one_lowers_the_mean_for_large_p(corpus):
    """The authors' formula caps p_i at 1 without redistributing: for large p the mean falls short."""
    mean_probability, _ = _mean_probability_and_replaced_share(corpus, 0.7)
    assert 0.5 < mean_probability < 0.7 - 0.05


def test_probabilities_follow_the_authors_formula():
    scores = [0.1, 0.4, 0.2, 0.1, 0.3]
    probs = replacement_probabilities(scores, 0.5)
    raw = np.array(scores) - 0.1
    expected = np.minimum(1.0, raw / raw.sum() * 0.5 * 5)
    assert np.allclose(probs, expected)  # here the top term already reaches 1: nothing forced
    assert probs[1] == 1.0 and probs[0] == 0.0
    low = replacement_probabilities([0.1, 0.2, 0.15, 0.12, 0.11, 0.13, 0.14, 0.16, 0.18, 0.19], 0.1)
    assert max(low) == 1.0 and low[1] == 1.0  # p = 0.1: no p_i reaches 1, so the top term is forced
    assert replacement_probabilities([0.7], 0.5) == [1.0]
    assert replacement_probabilities([0.2, 0.2, 0.2], 0.5) == [1.0, 0.5, 0.5]
    assert replacement_probabilities([], 0.5) == []


def test_top_tfidf_term_is_always_replaced_and_every_negative_differs(fitted, corpus):
    for seed in range(3):
        plans = _seeded_plans(fitted, corpus[:600], seed)
        for plan in plans:
            assert int(np.argmax(plan.scores)) in plan.chosen
        negatives = fitted.augment(corpus[:600], seed)
        assert all(neg != s.lower() for neg, s in zip(negatives, corpus[:600], strict=True))


# Step 3 --------------------------------------------------------------------------------------

def test_every_replacement_lies_within_the_radius(fitted, corpus):
    stats = fitted.stats
    rng = random.Random(1)
    for rank in range(stats.size):
        for _ in range(5):
            assert abs(fitted.sample_replacement(rank, rng) - rank) <= fitted.radius
    # End to end: tokens of the negative that changed come from the window of the original's rank.
    checked = 0
    for sentence, negative in zip(corpus[:500], fitted.augment(corpus[:500], 3), strict=True):
        before = [t for _, _, t in tokenize(sentence.lower())]
        after = [t for _, _, t in tokenize(negative)]
        if len(before) != len(after):
            continue  # a replacement that re-tokenises differently (e.g. a punctuation term)
        for old, new in zip(before, after, strict=True):
            if old != new:
                old_rank, new_rank = (stats.rank[stats.vocabulary[t]] for t in (old, new))
                assert abs(old_rank - new_rank) <= fitted.radius
                checked += 1
    assert checked > 1000


@pytest.mark.parametrize("exclude_self", [False, True])
def test_sampling_frequencies_follow_max_tfidf(fitted, exclude_self):
    """Chi-square goodness of fit of 20 000 draws against max TF-IDF within the window."""
    from scipy.stats import chisquare

    stats = fitted.stats
    everything = stats.sorted_max_tfidf()

    def spread(r):
        lo_, hi_ = stats.window(r, fitted.radius)
        return everything[lo_:hi_].max() / everything[lo_:hi_].min()

    # The full window where max TF-IDF varies most (the tail of the ordering, on this corpus).
    rank = max(range(fitted.radius, stats.size - fitted.radius), key=spread)
    lo, hi = stats.window(rank, fitted.radius)
    weights = everything[lo:hi].copy()
    if exclude_self:
        weights[rank - lo] = 0.0
    assert weights.max() > 1.5 * weights[weights > 0].min()  # the window is not flat: the test can fail
    rng = random.Random(12345)
    draws = [stats.sample_rank(rank, fitted.radius, rng.random(), exclude_self=exclude_self) for _ in range(20_000)]
    counts = np.bincount(np.array(draws) - lo, minlength=hi - lo)
    keep = weights > 0
    assert counts[~keep].sum() == 0
    expected = weights[keep] / weights[keep].sum() * counts.sum()
    assert chisquare(counts[keep], expected).pvalue > 1e-3
    # The same draws are clearly not uniform over the window, so the check above means something.
    uniform = np.full(keep.sum(), counts.sum() / keep.sum())
    assert chisquare(counts[keep], uniform).pvalue < 1e-6


# Ablations (paper Table 2) -------------------------------------------------------------------

def _plans_and_replacements(augmenter, sentences):
    plans = _seeded_plans(augmenter, sentences)
    ranks = list(range(0, augmenter.stats.size, 3))
    rng = random.Random(7)
    return plans, [augmenter.sample_replacement(r, rng) for r in ranks], ranks


def test_random_replacement_changes_only_step_3(corpus):
    una = build_augmenter("una", radius=10).fit(corpus)
    ablated = build_augmenter("una", radius=10, replacement="random").fit(corpus)
    plans, replacements, ranks = _plans_and_replacements(una, corpus[:300])
    plans_ablated, replacements_ablated, _ = _plans_and_replacements(ablated, corpus[:300])
    assert [p.chosen for p in plans] == [p.chosen for p in plans_ablated]
    assert [p.probabilities for p in plans] == [p.probabilities for p in plans_ablated]
    assert all(abs(new - r) <= 10 for new, r in zip(replacements, ranks, strict=True))
    outside = sum(abs(new - r) > 10 for new, r in zip(replacements_ablated, ranks, strict=True))
    assert outside > 0.8 * len(ranks)


def test_random_term_choice_changes_only_step_2(corpus):
    una = build_augmenter("una", radius=10).fit(corpus)
    ablated = build_augmenter("una", radius=10, term_choice="random").fit(corpus)
    plans, replacements, _ = _plans_and_replacements(una, corpus[:300])
    plans_ablated, replacements_ablated, _ = _plans_and_replacements(ablated, corpus[:300])
    assert replacements == replacements_ablated
    for plan in plans_ablated:
        assert sorted(set(plan.probabilities)) in ([0.5, 1.0], [1.0]) and plan.probabilities.count(1.0) == 1
    # TF-IDF choice prefers high scores; random choice does not.
    def top_share(plans_):
        hits = [int(np.argmax(p.scores)) in p.chosen for p in plans_]
        return np.mean(hits)
    assert top_share(plans) == 1.0 and top_share(plans_ablated) < 0.8
    assert [p.chosen for p in plans] != [p.chosen for p in plans_ablated]


def test_both_random_changes_both_steps(corpus):
    una = build_augmenter("una", radius=10).fit(corpus)
    both = build_augmenter("una", radius=10, term_choice="random", replacement="random").fit(corpus)
    plans, replacements, _ = _plans_and_replacements(una, corpus[:300])
    plans_both, replacements_both, _ = _plans_and_replacements(both, corpus[:300])
    assert [p.chosen for p in plans] != [p.chosen for p in plans_both]
    assert replacements != replacements_both
    assert all(neg != s.lower() for neg, s in zip(both.augment(corpus[:200], 0), corpus[:200], strict=True))


# Determinism, robustness, interface ----------------------------------------------------------

def test_deterministic_per_seed_and_independent_of_the_batch(fitted, corpus):
    batch = corpus[:200]
    first = fitted.augment(batch, 11)
    assert first == fitted.augment(batch, 11)
    assert fitted.augment(batch[50:60], 11) == first[50:60]
    other = fitted.augment(batch, 12)
    assert sum(a != b for a, b in zip(first, other, strict=True)) > 150


ODD_INPUTS = ["", "   ", "\t\n", "word", "Qwertyuiop", "unknownzz words only xyzzy", "!!!", "...", "🙂",
              "Ünïcödé façade 東京 İstanbul ß", "a\u0301b\u200bc", "the the the the", "x" * 5000,
              " ".join(["tok"] * 400), "mixed Case UNKNOWN Ωmega", "\x00null\x00"]


def test_odd_inputs_never_raise(fitted):
    out = fitted.augment(ODD_INPUTS, 0)
    assert len(out) == len(ODD_INPUTS)
    for original, negative in zip(ODD_INPUTS, out, strict=True):
        assert isinstance(negative, str)
        if tokenize(original.lower()):
            assert negative != original.lower()  # something was replaced
        else:
            assert negative == original  # nothing to replace: unchanged
    assert out == fitted.augment(ODD_INPUTS, 0)
    assert fitted.augment([], 0) == []


def test_tiny_vocabularies_do_not_break_it():
    single = build_augmenter("una", radius=3).fit(["same", "same same"])
    assert single.augment(["same", "other"], 0)[1] == "same"  # unknown word -> the only term
    assert single.augment(["same"], 0) == ["same"]  # one-term vocabulary: nothing else exists
    two = build_augmenter("una", radius=3).fit(["alpha beta", "beta", "beta"])
    assert two.augment(["beta"], 0) == ["alpha"]


def test_output_is_lowercased_and_keeps_spacing(fitted):
    out = fitted.augment(["Hello   World,  AGAIN"], 0)[0]
    assert out == out.lower()
    assert out.count("   ") == 1 and ",  " in out


def test_registration_params_and_errors(corpus, tmp_path):
    assert "una" in AUGMENTERS
    augmenter = build_augmenter("una")
    assert augmenter.name == "una" and augmenter.tag == "altering" and callable(augmenter.fit)
    with pytest.raises(RuntimeError, match="fit"):
        augmenter.augment(["a sentence"], 0)
    for bad in ({"p": 0}, {"p": 1.5}, {"radius": 0}, {"radius": 2.5}, {"tf": "raw"}, {"term_choice": "tf"},
                {"replacement": "nearest"}):
        with pytest.raises(ValueError, match="una: " + next(iter(bad))):
            build_augmenter("una", **bad)
    with pytest.raises(FileNotFoundError, match="cselab augment"):
        build_augmenter("una", extra_fit_texts_from=str(tmp_path / "missing.jsonl")).fit(corpus)


def test_explain_reports_the_plan(fitted, corpus):
    report = fitted.explain(corpus[0], 5)
    assert report["negative"] == fitted.augment([corpus[0]], 5)[0]
    assert len(report["tokens"]) == len(tokenize(corpus[0].lower()))
    assert any(t["chosen"] for t in report["tokens"])


def test_replacements_never_glue_two_words_together():
    una = build_augmenter("una", radius=5).fit(["(sa) is here", "alpha beta gamma", "delta", "(x)"] * 3)
    for seed in range(30):
        negative = una.augment(["(sa)"], seed)[0]
        terms = [t for _, _, t in tokenize(negative)]
        assert len(terms) == 3, negative  # three tokens in, three tokens out: no "1850backedjames"
