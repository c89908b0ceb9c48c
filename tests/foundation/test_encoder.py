"""Encoder: poolers, SimCSE's MLP only in training, sentence-transformers round trip."""
import numpy as np
import pytest
import torch

from cselab.model.encoder import SentenceEncoder
from cselab.model.poolers import POOLERS
from tests.conftest import TINY_BERT

SENTENCES = ["A man is playing a guitar.", "Two dogs run in the snow.", "x",
             "The stock market fell sharply today after the report."]


def _tiny(pooler="cls", mlp=None, mlp_only_train=True):
    torch.manual_seed(0)
    return SentenceEncoder.from_config(TINY_BERT, "minilm", pooler=pooler, mlp=mlp, mlp_only_train=mlp_only_train)


def test_mlp_only_train_bypasses_the_mlp_at_encode_time():
    encoder = _tiny("cls", mlp_only_train=True)
    assert encoder.mlp is not None
    features = encoder.tokenize(SENTENCES)
    encoder.eval()
    with torch.no_grad():
        encoded = encoder(features)
        cls_state = encoder.backbone(**features).last_hidden_state[:, 0]
        with_mlp = encoder(features, use_mlp=True)
    assert torch.allclose(encoded, cls_state, atol=1e-6)
    assert torch.allclose(with_mlp, encoder.mlp(cls_state), atol=1e-6)
    assert not torch.allclose(encoded, with_mlp, atol=1e-3)
    assert np.allclose(encoder.encode(SENTENCES), cls_state.numpy(), atol=1e-5)


def test_mlp_used_at_encode_time_when_not_only_train():
    encoder = _tiny("cls", mlp_only_train=False).eval()
    features = encoder.tokenize(SENTENCES)
    with torch.no_grad():
        cls_state = encoder.backbone(**features).last_hidden_state[:, 0]
    assert np.allclose(encoder.encode(SENTENCES), encoder.mlp(cls_state).detach().numpy(), atol=1e-5)


def test_simcse_rule_mlp_only_with_cls_pooler():
    assert _tiny("cls").mlp is not None
    assert _tiny("avg").mlp is None
    assert _tiny("cls_before_pooler").mlp is None


def test_avg_pooler_ignores_padding():
    encoder = _tiny("avg").eval()
    alone = encoder.encode(["x"])
    padded = encoder.encode(["x", "a much longer sentence that forces padding of the short one"], batch_size=2)
    assert np.allclose(alone[0], padded[0], atol=1e-5)


def test_encode_keeps_input_order_across_length_sorted_batches():
    encoder = _tiny("avg").eval()
    together = encoder.encode(SENTENCES, batch_size=2)
    one_by_one = np.stack([encoder.encode([s])[0] for s in SENTENCES])
    assert np.allclose(together, one_by_one, atol=1e-5)


@pytest.mark.parametrize("pooler,mlp_only_train", [(p, True) for p in POOLERS.names()] + [("cls", False)])
def test_saved_model_loads_in_sentence_transformers_with_same_embeddings(tmp_path, pooler, mlp_only_train):
    from sentence_transformers import SentenceTransformer

    encoder = _tiny(pooler, mlp_only_train=mlp_only_train)
    path = encoder.save(tmp_path / "model")
    assert not list(path.rglob("*.bin")) and not list(path.rglob("*.pt"))  # safetensors only
    ours = encoder.encode(SENTENCES)
    theirs = SentenceTransformer(str(path), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert np.allclose(ours, theirs, atol=1e-5)
    reloaded = SentenceEncoder.from_pretrained(str(path))
    assert reloaded.pooler == pooler
    assert np.allclose(reloaded.encode(SENTENCES), ours, atol=1e-5)


def test_layer_average_poolers_differ_from_last_layer():
    a, b = _tiny("avg_first_last").eval(), _tiny("avg").eval()
    assert not np.allclose(a.encode(SENTENCES), b.encode(SENTENCES), atol=1e-4)
