"""The generated docs table covers every registered augmenter."""
import pickle

from cselab.augment import AUGMENTERS, build_augmenter, load_all
from cselab.augment.doc_table import example_row


def test_example_rows_for_cheap_augmenters(tmp_path):
    for name in ["random_crop", "clear_word_deletion", "sequence", "cached", "with_probability"]:
        tag, before, after = example_row(name, tmp_path)
        assert tag in ("meaning-preserving", "possibly-altering", "altering")
        assert before and after and before != after, name


def test_unavailable_augmenter_gets_a_row_saying_so(tmp_path):
    from cselab.augment.base import Augmenter, AugmenterUnavailable

    load_all()

    class Broken(Augmenter):
        name, tag, description = "random_crop", "altering", "a stand-in whose dependency is missing"

        def __init__(self, **params):
            raise AugmenterUnavailable("needs something not installed")

    saved = AUGMENTERS.snapshot()
    AUGMENTERS.register("random_crop", Broken.description, replace=True)(Broken)
    try:
        tag, before, after = example_row("random_crop", tmp_path)
    finally:
        AUGMENTERS.restore(saved)
    assert "unavailable here" in after and "not installed" in after


def test_augmenters_survive_pickling_for_data_loader_workers():
    for name in ["clear_reorder", "eda_random_swap", "word_repetition"]:
        aug = build_augmenter(name)
        assert pickle.loads(pickle.dumps(aug)).augment(["a b c d e f"], 3) == aug.augment(["a b c d e f"], 3)
    seq = build_augmenter("sequence", steps=["random_crop", {"name": "clear_span_deletion"}])
    assert pickle.loads(pickle.dumps(seq)).augment(["a b c d e f"], 3) == seq.augment(["a b c d e f"], 3)
