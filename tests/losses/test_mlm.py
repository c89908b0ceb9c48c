"""The MLM term: BERT's 15% / 80-10-10 masking, protected tokens, tied prediction head."""
from __future__ import annotations

import pytest
import torch

from cselab.losses import LOSSES
from cselab.losses.base import StepOutputs
from cselab.losses.mlm import IGNORE


def synthetic_batch(tokenizer, rows: int = 400, width: int = 64, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 20000, (rows, width), generator=generator)
    lengths = torch.randint(8, width + 1, (rows,), generator=generator)
    attention = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).long()
    ids[:, 0] = tokenizer.cls_token_id
    ids[torch.arange(rows), lengths - 1] = tokenizer.sep_token_id
    ids[attention == 0] = tokenizer.pad_token_id
    return ids, attention


def test_masking_rates_and_protected_tokens(tiny_encoder):
    tokenizer = tiny_encoder.tokenizer
    torch.manual_seed(0)
    ids, attention = synthetic_batch(tokenizer)
    masked, labels = LOSSES.build("mlm").mask(ids, attention, tokenizer)
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) | (attention == 0)
    selected = labels != IGNORE
    # Special tokens and padding: never selected, never changed.
    assert not selected[special].any()
    assert torch.equal(masked[special], ids[special])
    # Unselected tokens are unchanged; selected ones keep their original id as the label.
    assert torch.equal(masked[~selected], ids[~selected])
    assert torch.equal(labels[selected], ids[selected])
    eligible = (~special).sum().item()
    assert eligible > 10000
    assert selected.sum().item() / eligible == pytest.approx(0.15, abs=0.01)
    chosen = masked[selected]
    original = ids[selected]
    as_mask = (chosen == tokenizer.mask_token_id).float().mean().item()
    unchanged = (chosen == original).float().mean().item()
    random_token = ((chosen != tokenizer.mask_token_id) & (chosen != original)).float().mean().item()
    assert as_mask == pytest.approx(0.8, abs=0.03)
    assert random_token == pytest.approx(0.1, abs=0.03)
    assert unchanged == pytest.approx(0.1, abs=0.03)


def step_outputs(encoder, sentences):
    features = dict(encoder.tokenize(sentences))
    n = len(sentences)
    embeddings = torch.randn(n, encoder.hidden_size)
    return StepOutputs(embeddings, embeddings, extra={"features": features, "roles": {"anchor": slice(0, n)},
                                                      "encoder": encoder, "step": 0})


SENTENCES = ["the cat sat on the warm mat near the door", "a dog ran across the green field today",
             "my neighbour paints small houses in the evening", "the teacher reads a long letter aloud"] * 4


def test_head_is_tied_to_the_input_embeddings(tiny_encoder):
    torch.manual_seed(0)
    term = LOSSES.build("mlm", probability=0.3)
    outputs = step_outputs(tiny_encoder, SENTENCES)
    loss, logs = term(outputs)
    embedding = tiny_encoder.backbone.get_input_embeddings().weight
    assert term.decoder(tiny_encoder.backbone) is embedding
    assert all(p is not embedding for p in term.parameters())  # tied, not a copy
    assert term.decoder_bias.shape == (embedding.shape[0],)
    assert term.transform_weight.shape == (tiny_encoder.hidden_size, tiny_encoder.hidden_size)
    loss.backward()
    assert embedding.grad is not None and embedding.grad.abs().sum() > 0
    assert loss.item() == pytest.approx(torch.log(torch.tensor(float(embedding.shape[0]))).item(), rel=0.2)
    untied = LOSSES.build("mlm", tie_to_input_embeddings=False)
    untied(outputs)
    assert untied.decoder_weight.shape == embedding.shape and untied.decoder(tiny_encoder.backbone) is untied.decoder_weight


def test_mlm_learns_on_a_fixed_batch(tiny_encoder):
    torch.manual_seed(0)
    term = LOSSES.build("mlm", hidden_size=tiny_encoder.hidden_size,
                        vocab_size=tiny_encoder.backbone.get_input_embeddings().weight.shape[0])
    optimizer = torch.optim.AdamW([*tiny_encoder.parameters(), *term.parameters()], lr=3e-3)
    outputs = step_outputs(tiny_encoder, SENTENCES)
    losses = []
    for _ in range(25):
        loss, _ = term(outputs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5


def test_invalid_rates_are_rejected():
    with pytest.raises(ValueError, match="probability"):
        LOSSES.build("mlm", probability=0.0)
    with pytest.raises(ValueError, match="sum"):
        LOSSES.build("mlm", mask_replace_prob=0.8, random_replace_prob=0.3)


def test_original_sentences_are_masked_when_the_batch_carries_them(tiny_encoder):
    """CLEAR masks the original sentences, not the augmented views the contrastive term sees."""
    outputs = step_outputs(tiny_encoder, ["[DEL] sat [DEL] mat", "dog ran [DEL]"])
    originals = dict(tiny_encoder.tokenize(["the cat sat on the mat", "a dog ran across the field"]))
    outputs.extra["original_features"] = originals
    tokens = LOSSES.get("mlm").source_tokens(outputs)
    assert torch.equal(tokens["input_ids"], originals["input_ids"])
    del outputs.extra["original_features"]
    tokens = LOSSES.get("mlm").source_tokens(outputs)
    assert torch.equal(tokens["input_ids"], outputs.extra["features"]["input_ids"])
