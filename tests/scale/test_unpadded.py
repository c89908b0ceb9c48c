"""speed/unpadded.py computes the backbone's own function on real tokens only; the persistent
embedding gradient of speed/cpu.py equals nn.Embedding's."""
import copy

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

from cselab.speed.cpu import PersistentGradEmbedding, use_persistent_embedding_grad
from cselab.speed.unpadded import supports_unpadding, unpadded_forward

SIZES = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=40)


def tiny(kind: str, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    config = (BertConfig if kind == "bert" else RobertaConfig)(
        **SIZES, pad_token_id=0 if kind == "bert" else 1, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout)
    return (BertModel if kind == "bert" else RobertaModel)(config, add_pooling_layer=False)


def batch(pad_id: int):
    ids = torch.randint(3, 120, (4, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    mask[2, 2:] = 0
    mask[3, 9:] = 0
    return ids.masked_fill(mask == 0, pad_id), mask


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_every_hidden_state_equals_the_padded_forward_on_real_tokens(kind):
    model = tiny(kind).eval()
    ids, mask = batch(model.config.pad_token_id)
    reference = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    unpadded = unpadded_forward(model, ids, mask, all_hidden_states=True)
    assert len(unpadded) == len(reference) == SIZES["num_hidden_layers"] + 1
    real = mask.bool()
    for ours, theirs in zip(unpadded, reference, strict=True):
        assert ours.shape == theirs.shape
        assert torch.allclose(ours[real], theirs[real], atol=1e-5)
    assert unpadded[-1][~real].abs().max() == 0  # pads are zeros, never garbage
    (last,) = unpadded_forward(model, ids, mask)
    assert torch.equal(last, unpadded[-1])


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_gradients_equal_the_padded_forward(kind):
    padded_model = tiny(kind).train()  # dropout 0: training mode, same function
    unpadded_model = copy.deepcopy(padded_model)
    ids, mask = batch(padded_model.config.pad_token_id)
    weights = mask.unsqueeze(-1).float()

    def mean_pool_loss(states):
        pooled = (states * weights).sum(1) / weights.sum(1)
        return (pooled ** 2).sum() + pooled[:, :3].sum()

    mean_pool_loss(padded_model(input_ids=ids, attention_mask=mask).last_hidden_state).backward()
    mean_pool_loss(unpadded_forward(unpadded_model, ids, mask)[0]).backward()
    pairs = list(zip(padded_model.named_parameters(), unpadded_model.parameters(), strict=True))
    assert all(theirs.grad is not None for (_, theirs), _ in pairs)
    for (name, theirs), ours in pairs:
        assert torch.allclose(ours.grad, theirs.grad, atol=1e-5), name


def test_bf16_autocast_stays_close_and_returns_fp32():
    model = tiny("bert").eval()
    ids, mask = batch(0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (ours,) = unpadded_forward(model, ids, mask)
    reference = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert ours.dtype == torch.float32
    real = mask.bool()
    assert (ours[real] - reference[real]).abs().max() < 0.15  # bf16 keeps ~3 significant digits


class CountingDropout(nn.Dropout):
    """The attention's own dropout module, recording each call that drops (training mode)."""

    def __init__(self, p: float, calls: list):
        super().__init__(p)
        self.calls = calls

    def forward(self, x):
        if self.training:
            self.calls.append(self.p)
        return super().forward(x)


def test_attention_dropout_is_the_attentions_own_module_in_training_only():
    model = tiny("bert", dropout=0.5)
    ids, mask = batch(0)
    calls = []
    for layer in model.encoder.layer:  # what use_fast_dropout swaps, the unpadded forward must call
        layer.attention.self.dropout = CountingDropout(0.5, calls)

    model.eval()
    unpadded_forward(model, ids, mask)
    assert calls == []
    model.train()
    first = unpadded_forward(model, ids, mask)[0]
    assert calls == [0.5] * SIZES["num_hidden_layers"]
    assert not torch.equal(first, unpadded_forward(model, ids, mask)[0])  # dropout draws differ


def test_other_layouts_are_not_unpadded():
    assert supports_unpadding(tiny("bert"))
    relative = BertModel(BertConfig(**SIZES, position_embedding_type="relative_key"), add_pooling_layer=False)
    assert not supports_unpadding(relative)
    assert not supports_unpadding(nn.Linear(2, 2))


def test_sentence_encoder_gives_the_same_vectors_unpadded():
    from cselab.model.encoder import SentenceEncoder

    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config({"model_type": "bert", **SIZES, "vocab_size": 30522}, pooler="avg_first_last")
    sentences = ["a short one", "a somewhat longer sentence than the first one is", "x"]
    padded = encoder.encode(sentences, batch_size=3)
    assert encoder.use_unpadded() and encoder.unpadded
    assert encoder.encode(sentences, batch_size=3) == pytest.approx(padded, abs=1e-5)


class TiedToy(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(50, 8, padding_idx=0)
        self.decoder = nn.Linear(8, 50)
        self.decoder.weight = self.embedding.weight  # tied, as an MLM head is

    def get_input_embeddings(self):
        return self.embedding

    def forward(self, ids):
        return self.decoder(self.embedding(ids)).logsumexp(-1).sum()


def test_persistent_embedding_gradient_equals_nn_embedding():
    torch.manual_seed(0)
    reference = TiedToy()
    persistent = copy.deepcopy(reference)
    persistent.decoder.weight = persistent.embedding.weight
    assert use_persistent_embedding_grad(persistent)
    assert isinstance(persistent.embedding, PersistentGradEmbedding)
    assert persistent.state_dict().keys() == reference.state_dict().keys()
    buffers = set()
    for step in range(3):
        for model in (reference, persistent):
            model.zero_grad(set_to_none=True)
            for chunk in range(2):  # two backward passes per step accumulate (GradCache)
                ids = torch.tensor([[0, 2, 0, 5], [7, 7, 1, 0]]) + 3 * step * chunk
                model(ids).backward()
        buffers.add(persistent.embedding.weight.grad.data_ptr())
        for ours, theirs in zip(persistent.parameters(), reference.parameters(), strict=True):
            assert torch.allclose(ours.grad, theirs.grad, atol=1e-6)
        assert persistent.embedding.weight.grad[0].abs().max() > 0  # the tied decoder's share of row 0
    assert len(buffers) == 1  # one buffer, kept across steps
    with torch.no_grad():
        assert torch.equal(persistent.embedding(torch.tensor([3])), reference.embedding(torch.tensor([3])))


def test_padding_row_gets_no_gradient_from_the_lookup():
    table = nn.Embedding(10, 4, padding_idx=0)
    holder = nn.Module()
    holder.get_input_embeddings = lambda: table
    assert use_persistent_embedding_grad(holder)
    table(torch.tensor([0, 0, 3])).sum().backward()
    assert table.weight.grad[0].abs().max() == 0 and table.weight.grad[3].abs().min() == 1
    assert not use_persistent_embedding_grad(nn.Linear(2, 2))


def test_rows_are_rounded_up_so_that_matmul_shapes_repeat():
    from cselab.speed.unpadded import ROW_MULTIPLE, _Positions

    _, mask = batch(0)  # 28 real tokens of 44 positions
    positions = _Positions(mask)
    assert positions.tokens == int(mask.sum()) == 28
    assert positions.rows == ROW_MULTIPLE and len(positions.real) == positions.rows
    # Every real position maps to its row, every pad to the zero row after the last row.
    flat = mask.reshape(-1).bool()
    assert torch.equal(positions.source[flat], torch.arange(28))
    assert (positions.source[~flat] == positions.rows).all()
    # The gradient tests above run with 36 extra rows: they take part in no output and no gradient.
