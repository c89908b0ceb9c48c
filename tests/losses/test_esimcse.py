"""ESimCSE's term, momentum encoder and queue (losses/esimcse.py) against hand computations and the
authors' code (caskcsg/sentemb ESimCSE/esimcse/models.py, trainers.py)."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from cselab.config import ConfigError
from cselab.losses import LOSSES
from cselab.losses.base import LossInputs
from cselab.losses.esimcse import KeyQueue, MomentumEncoder, MomentumKeysPass


def term(**params):
    return LOSSES.build("esimcse", **params)


def test_the_term_is_infonce_over_positives_then_the_queue_by_hand():
    """B = 2, h = 2, K = 3, tau = 0.05: rows are the anchors, columns the two positives then the queue."""
    anchor = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positive = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    queue = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, -3.0]])
    loss, logs = term(temperature=0.05)(LossInputs(anchor=anchor, positive=positive, tokens={"momentum_keys": queue}))
    # cosines: row 0 = [1/sqrt2, 0 | 1, -1, 0], row 1 = [1/sqrt2, 1 | 0, 0, -1]
    r = 1 / math.sqrt(2)
    rows = [[r, 0, 1, -1, 0], [r, 1, 0, 0, -1]]
    expected = sum(-row[i] / 0.05 + math.log(sum(math.exp(c / 0.05) for c in row)) for i, row in enumerate(rows)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # Row 0's largest logit is a queue key (1 > 1/sqrt2), row 1's its own positive.
    assert logs["acc"].item() == 0.5


def test_the_term_matches_the_authors_logits():
    """models.py:231, 241-248: cos_sim = sim(z1, z2); cat with sim(z1, pre_z1); CrossEntropy(arange(B))."""
    generator = torch.Generator().manual_seed(3)
    z1, z2, pre_z1 = (torch.randn(shape, generator=generator) for shape in ((6, 8), (6, 8), (10, 8)))
    cos = nn.CosineSimilarity(dim=-1)
    logits = torch.cat([cos(z1.unsqueeze(1), z2.unsqueeze(0)), cos(z1.unsqueeze(1), pre_z1.unsqueeze(0))], 1) / 0.05
    authors = nn.CrossEntropyLoss()(logits, torch.arange(6))
    ours, _ = term()(LossInputs(anchor=z1, positive=z2, tokens={"momentum_keys": pre_z1}))
    assert ours.item() == pytest.approx(authors.item(), rel=1e-5)


def test_an_empty_queue_is_simcse_infonce():
    """Step 1 (trainers.py:623, pre_z1 None): the loss is plain InfoNCE."""
    generator = torch.Generator().manual_seed(0)
    anchor, positive = torch.randn(5, 4, generator=generator), torch.randn(5, 4, generator=generator)
    inputs = LossInputs(anchor=anchor, positive=positive, tokens={"momentum_keys": torch.zeros(0, 4)})
    ours, _ = term(temperature=0.05)(inputs)
    simcse, _ = LOSSES.build("infonce", temperature=0.05)(LossInputs(anchor=anchor, positive=positive))
    assert torch.equal(ours, simcse)


def test_the_term_reads_the_pass_with_its_settings_and_refuses_bad_values():
    built = term(momentum=0.9, queue_size=32)
    assert built.token_passes == {"momentum_keys": {"momentum": 0.9, "queue_size": 32}}
    assert "momentum_keys" in built.needs
    for bad in ({"temperature": 0}, {"momentum": 1.5}, {"queue_size": 0}):
        with pytest.raises(ValueError):
            term(**bad)
    # The queue holds the encoder's vectors: any training head (same width or not) is refused, naming the key.
    with pytest.raises(ConfigError, match="model.projection"):
        term(projected=True)
    assert term(projected=False).temperature == 0.05


def test_a_projection_head_of_the_encoders_width_is_refused_before_training(tiny_corpus, tmp_path):
    import json

    from cselab.config import load_config
    from cselab.train.setup import build_setup
    from tests.conftest import TINY_BERT

    config = load_config("esimcse", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}",
                                     "model.projection=bn_mlp", f"train.output_dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match="^model.projection: the esimcse queue holds the encoder's own vectors"):
        build_setup(config, torch.device("cpu"))


def test_the_momentum_update_is_an_ema_of_the_online_parameters():
    online = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        online.weight.fill_(1.0)
    momentum = MomentumEncoder(0.5)
    momentum.start(online)
    with torch.no_grad():
        online.weight.fill_(3.0)
    momentum.update(online)
    assert momentum.backbone.weight.item() == 2.0  # 0.5 x 1 + 0.5 x 3
    momentum.update(online)
    assert momentum.backbone.weight.item() == 2.5
    # Never trained by gradient, and no module of the online side.
    assert not momentum.backbone.weight.requires_grad and momentum.backbone is not online


def test_the_queue_keeps_the_newest_rows_in_order():
    queue = KeyQueue(3)
    rows = torch.arange(10.0).view(5, 2)
    queue.push(rows[:2])
    assert torch.equal(queue.keys, rows[:2])
    queue.push(rows[2:4])
    assert torch.equal(queue.keys, rows[1:4])  # oldest dropped first
    queue.push(rows[4:])
    assert torch.equal(queue.keys, rows[2:5])
    restored = KeyQueue(3)
    restored.load_state_dict(queue.state_dict())
    assert torch.equal(restored.keys, queue.keys)
    with pytest.raises(ValueError, match="at most 2"):
        KeyQueue(2).load_state_dict(queue.state_dict())


def test_the_pass_returns_the_queue_before_the_step_then_adds_the_momentum_keys(tiny_encoder):
    """k_t = MLP(CLS(momentum(x))) with the momentum encoder in eval mode (no dropout) and the online MLP;
    the term sees the queue of earlier steps only."""
    sentences = ["a cat sees the river", "the old man reads a letter today", "birds sing"]
    token_pass = MomentumKeysPass(momentum=0.995, queue_size=4)
    token_pass.setup(tiny_encoder, None)
    tokens = token_pass.preparer(tiny_encoder.tokenizer)(dict(tiny_encoder.tokenize(sentences)), 0)
    tiny_encoder.train()  # the step's mode: dropout on in the online encoder
    first = token_pass(tokens, tiny_encoder, LossInputs())
    assert first.shape == (0, tiny_encoder.hidden_size)
    second = token_pass(tokens, tiny_encoder, LossInputs())
    tiny_encoder.eval()
    with torch.no_grad():  # the online weights are unchanged, so the momentum copy equals them
        expected = tiny_encoder(dict(tiny_encoder.tokenize(sentences)), use_mlp=True)
    assert torch.allclose(second, expected, atol=1e-6)
    assert torch.equal(token_pass.queue.keys, torch.cat([second, second])[-4:])  # newest 4 of 6
    assert set(token_pass.components()) == {"momentum_encoder", "queue"}
    # Out of the module tree: neither trained, nor in the heads' checkpoint, nor seen by DDP.
    assert not list(token_pass.parameters()) and not token_pass.state_dict()


def test_the_keys_run_on_real_tokens_where_the_encoder_does(tiny_encoder):
    """model.unpad: the momentum forward skips the pads too, counting them from the pass's positions (a
    host integer, no read-back); the keys are the padded forward's."""
    sentences = ["a cat", "the old man reads a long letter to the children today", "birds sing at night"]
    token_pass = MomentumKeysPass()
    token_pass.setup(tiny_encoder, None)
    tokens = token_pass.preparer(tiny_encoder.tokenizer)(dict(tiny_encoder.tokenize(sentences)), 0)
    assert len(tokens.positions) == int(tokens.features["attention_mask"].sum())
    padded = token_pass.momentum_encoder.encode(tokens.features, tiny_encoder)
    assert tiny_encoder.use_unpadded()
    unpadded = token_pass.momentum_encoder.encode(tokens.features, tiny_encoder, real_tokens=len(tokens.positions))
    assert torch.allclose(padded, unpadded, atol=1e-5)
