"""The GradCache step gives the gradients of the plain step, with dropout masks replayed."""
import torch

from cselab.data.collate import Batch
from cselab.losses import build_objective
from cselab.model.encoder import SentenceEncoder
from cselab.train.steps import GradCacheStep, PlainStep, StepForward, chunk_rows
from tests.conftest import TINY_BERT

BATCH, CHUNK = 512, 32


def _setup():
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config({**TINY_BERT, "num_hidden_layers": 1}, "minilm", pooler="cls")
    words = ["red", "blue", "cat", "dog", "runs", "sleeps", "the", "a", "tree", "house", "big", "small"]
    g = torch.Generator().manual_seed(1)
    sentences = [" ".join(words[i] for i in torch.randint(0, len(words), (int(torch.randint(2, 9, (1,), generator=g)),),
                                                          generator=g))
                 for _ in range(BATCH)]
    features = dict(encoder.tokenize(sentences + sentences))  # anchors then their dropout positives
    batch = Batch(step=0, num_sentences=BATCH, features=features,
                  roles={"anchor": slice(0, BATCH), "positive": slice(BATCH, 2 * BATCH)})
    objective = build_objective([{"name": "infonce", "temperature": 0.05}])
    forward = StepForward(encoder, torch.nn.Identity(), objective, torch.device("cpu"), "fp32")
    return encoder, batch, PlainStep(forward), GradCacheStep(forward, chunk_size=CHUNK)


def _grads(encoder):
    return [p.grad.clone() for p in encoder.parameters() if p.grad is not None]


def _close(a, b, tol=1e-5):
    return len(a) == len(b) and all(torch.allclose(x, y, atol=tol, rtol=1e-4) for x, y in zip(a, b, strict=True))


def test_equals_one_big_batch_without_dropout():
    encoder, batch, plain, cached = _setup()
    encoder.eval()  # no dropout: one full pass is the exact reference
    reference = plain(batch).loss
    expected = _grads(encoder)
    encoder.zero_grad()
    loss = cached(batch).loss
    assert abs(loss.item() - reference.item()) < 1e-5
    assert _close(_grads(encoder), expected)


def test_dropout_masks_are_replayed():
    encoder, batch, plain, cached = _setup()
    encoder.train()
    torch.manual_seed(123)
    loss = cached(batch).loss
    grads = _grads(encoder)
    encoder.zero_grad()
    # Reference: the same chunks with gradient, from the same RNG stream (no cache). Without the
    # replay, GradCache's second pass would draw new masks and its gradients would differ.
    torch.manual_seed(123)
    features = batch.features
    lengths = features["attention_mask"].sum(dim=1)
    pieces = [encoder(chunk_rows(features, start, start + CHUNK, int(lengths[start:start + CHUNK].max())))
              for start in range(0, 2 * BATCH, CHUNK)]
    reference, _ = plain.forward.loss(torch.cat(pieces), batch)
    reference.backward()
    assert abs(loss.item() - reference.item()) < 1e-5
    assert _close(grads, _grads(encoder))
