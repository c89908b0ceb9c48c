"""GradCache gives the gradients of the uncached loss, with dropout masks replayed."""
import torch

from cselab.losses.base import StepOutputs
from cselab.losses.infonce import InfoNCELoss
from cselab.model.encoder import SentenceEncoder
from cselab.train.gradcache import _chunk, grad_cache_backward
from tests.conftest import TINY_BERT

BATCH, CHUNK = 512, 32


def _setup():
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config({**TINY_BERT, "num_hidden_layers": 1}, "minilm", pooler="cls")
    words = ["red", "blue", "cat", "dog", "runs", "sleeps", "the", "a", "tree", "house", "big", "small"]
    g = torch.Generator().manual_seed(1)
    sentences = [" ".join(words[i] for i in torch.randint(0, len(words), (int(torch.randint(2, 9, (1,), generator=g)),), generator=g))
                 for _ in range(BATCH)]
    features = dict(encoder.tokenize(sentences + sentences))  # anchors then their dropout positives
    loss_fn = InfoNCELoss(temperature=0.05)

    def loss_from(embeddings):
        return loss_fn(StepOutputs(anchor=embeddings[:BATCH], positive=embeddings[BATCH:]))[0]

    return encoder, features, loss_from


def _grads(encoder):
    return [p.grad.clone() for p in encoder.parameters() if p.grad is not None]


def _close(a, b, tol=1e-5):
    return all(torch.allclose(x, y, atol=tol, rtol=1e-4) for x, y in zip(a, b)) and len(a) == len(b)


def test_equals_one_big_batch_without_dropout():
    encoder, features, loss_from = _setup()
    encoder.eval()  # no dropout: one full pass is the exact reference
    reference = loss_from(encoder(features, use_mlp=True))
    reference.backward()
    expected = _grads(encoder)
    encoder.zero_grad()
    loss = grad_cache_backward(lambda f: encoder(f, use_mlp=True), features, CHUNK, loss_from)
    assert abs(loss.item() - reference.item()) < 1e-5
    assert _close(_grads(encoder), expected)


def test_dropout_masks_are_replayed():
    encoder, features, loss_from = _setup()
    encoder.train()
    torch.manual_seed(123)
    loss = grad_cache_backward(encoder, features, CHUNK, loss_from)
    cached = _grads(encoder)
    encoder.zero_grad()
    # Reference: the same chunks with gradient, from the same RNG stream (no cache). Without the
    # replay, GradCache's second pass would draw new masks and its gradients would differ.
    torch.manual_seed(123)
    pieces = []
    total = features["input_ids"].shape[0]
    for start in range(0, total, CHUNK):
        pieces.append(encoder(_chunk(features, start, start + CHUNK)))
    reference = loss_from(torch.cat(pieces))
    reference.backward()
    assert abs(loss.item() - reference.item()) < 1e-5
    assert _close(cached, _grads(encoder))
