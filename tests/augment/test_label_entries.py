"""`views.label` entries as mappings: one augmenter listed more than once with its own parameters, such as
AugCSE's label views read from a `cselab augment` file, one `cached` entry per augmentation type."""
import pytest

from cselab.cli import main
from cselab.config import load_config
from cselab.config.validation import label_augmenters
from cselab.data.views import ViewBuilder
from cselab.errors import ConfigError

SENTENCES = [f"The cat number {i} sat on the old mat near the door ." for i in range(12)]


@pytest.fixture
def cache_file(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "aug.jsonl"
    assert main(["augment", "--aug", "random_crop,eda_random_swap", "--in", str(corpus), "--out", str(out)]) == 0
    return out


def cached_labels(path, names):
    entries = [f"{{name: cached, path: '{path}', augmentation: {name}}}" for name in names]
    return f"views.label=[{', '.join(entries)}]"


def test_each_cached_entry_reads_its_own_augmentation_and_labels_it(cache_file):
    from cselab.augment.cache import read_cache

    config = load_config("augcse", [cached_labels(cache_file, ["random_crop", "eda_random_swap"]),
                                    "objective[1].num_labels=3"])
    builder = ViewBuilder(config.views, SENTENCES, seed=1)
    assert len(builder.labelers) == 2
    outputs = [read_cache(cache_file, name) for name in ("random_crop", "eda_random_swap")]
    views = builder(0, SENTENCES)
    for sentence, label, text in zip(SENTENCES, views.labels, views.label_texts, strict=True):
        if label == 0:
            assert text == sentence
        else:  # the text the file holds for that type, and the type's number is its place in views.label
            assert text == outputs[label - 1][sentence][0] != sentence
    assert {1, 2} <= set(views.labels)


def test_name_entries_keep_their_label_params():
    config = load_config("simcse", ["views.label=[random_crop, {name: random_crop, ratio: 0.5}]",
                                    "views.label_params={random_crop: {ratio: 0.2}}"])
    assert label_augmenters(config.views) == [("label_params.random_crop", "random_crop", {"ratio": 0.2}),
                                               ("label[1]", "random_crop", {"ratio": 0.5})]
    first, second = ViewBuilder(config.views, SENTENCES, seed=0).labelers
    assert (first.ratio, second.ratio) == (0.2, 0.5)


@pytest.mark.parametrize(("overrides", "expected"), [
    (["views.label=[{path: x.jsonl}]"], "views.label[0]: a mapping entry needs a 'name'"),
    (["views.label=[random_crop, {name: nope}]"], "views.label[1]: unknown augmenter 'nope'"),
    (["views.label=[random_crop, {name: random_crop, bogus: 1}]"], "views.label[1].bogus"),
    (["views.label=[{name: random_crop}]", "views.label_params={random_crop: {ratio: 0.2}}"],
     "views.label_params.random_crop: not one of views.label"),
])
def test_bad_entries_are_one_line_errors_naming_the_entry(overrides, expected):
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_config("simcse", overrides)
