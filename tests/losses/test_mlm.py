"""The MLM term and its masking: BERT's 15% / 80-10-10 in the collator, protected tokens, a
per-step seed, the backbone's own tied prediction head (loaded and saved with the model), and a head
that learns."""
from __future__ import annotations

import pytest
import torch

from cselab.losses import LOSSES, build_objective
from cselab.losses.base import LossInputs, MaskedTokens
from cselab.losses.masking import IGNORE, MlmMasking
from cselab.model.mlm_head import MlmHead


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
    ids, attention = synthetic_batch(tokenizer)
    batch = MlmMasking(tokenizer)({"input_ids": ids, "attention_mask": attention}, seed=0)
    masked = batch.features["input_ids"]
    selected = torch.zeros(ids.numel(), dtype=torch.bool)
    selected[batch.positions] = True
    selected = selected.view_as(ids)
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) | (attention == 0)
    # Special tokens and padding: never selected, never changed.
    assert not selected[special].any()
    assert torch.equal(masked[special], ids[special])
    # Unselected tokens are unchanged; selected ones keep their original id as the label.
    assert torch.equal(masked[~selected], ids[~selected])
    assert torch.equal(batch.labels, ids.reshape(-1)[batch.positions])
    assert IGNORE not in batch.labels
    eligible = (~special).sum().item()
    assert eligible > 10000
    assert selected.sum().item() / eligible == pytest.approx(0.15, abs=0.01)
    chosen, original = masked[selected], ids[selected]
    as_mask = (chosen == tokenizer.mask_token_id).float().mean().item()
    unchanged = (chosen == original).float().mean().item()
    random_token = ((chosen != tokenizer.mask_token_id) & (chosen != original)).float().mean().item()
    assert as_mask == pytest.approx(0.8, abs=0.03)
    assert random_token == pytest.approx(0.1, abs=0.03)
    assert unchanged == pytest.approx(0.1, abs=0.03)


def test_masks_depend_on_the_seed_only(tiny_encoder):
    ids, attention = synthetic_batch(tiny_encoder.tokenizer, rows=32)
    masking = MlmMasking(tiny_encoder.tokenizer)
    first = masking({"input_ids": ids, "attention_mask": attention}, seed=7)
    torch.manual_seed(123)  # the global RNG plays no part
    again = masking({"input_ids": ids, "attention_mask": attention}, seed=7)
    other = masking({"input_ids": ids, "attention_mask": attention}, seed=8)
    assert torch.equal(first.positions, again.positions) and torch.equal(first.features["input_ids"],
                                                                         again.features["input_ids"])
    assert not torch.equal(first.positions, other.positions)


SENTENCES = ["the cat sat on the warm mat near the door", "a dog ran across the green field today",
             "my neighbour paints small houses in the evening", "the teacher reads a long letter aloud"] * 4


def masked_tokens(encoder, head, masking, seed=0) -> MaskedTokens:
    """What the training step hands the term: the MLM head's logits at the masked positions (steps.py)."""
    batch = masking(dict(encoder.tokenize(SENTENCES)), seed)
    states = encoder.token_states(batch.features)
    return MaskedTokens(head(states.reshape(-1, states.shape[-1])[batch.positions]), batch.labels)


def test_the_head_is_the_backbones_own_and_tied_to_the_input_embeddings(tiny_encoder):
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    head, term = MlmHead(tiny_encoder.backbone), build_objective([{"name": "mlm"}]).terms[0]
    reference = BertForMaskedLM(tiny_encoder.backbone.config).cls
    assert type(head.head) is type(reference)  # BERT's own cls head, not a copy of its layers
    embedding = tiny_encoder.input_embeddings()
    assert head.head.predictions.decoder.weight is embedding  # tied, not a copy
    assert not list(term.parameters())  # the term is the loss alone; the head belongs to the model
    loss, logs = term(LossInputs(masked=masked_tokens(tiny_encoder, head, MlmMasking(tiny_encoder.tokenizer, 0.3))))
    loss.backward()
    assert embedding.grad is not None and embedding.grad.abs().sum() > 0
    assert loss.item() == pytest.approx(torch.log(torch.tensor(float(embedding.shape[0]))).item(), rel=0.2)
    assert set(logs) == {"loss", "acc"} and all(torch.is_tensor(v) for v in logs.values())


def test_mlm_learns_on_a_fixed_batch(tiny_encoder):
    torch.manual_seed(0)
    head, term = MlmHead(tiny_encoder.backbone), build_objective([{"name": "mlm"}]).terms[0]
    masking = MlmMasking(tiny_encoder.tokenizer)
    optimizer = torch.optim.AdamW(torch.nn.ModuleList([tiny_encoder, head]).parameters(), lr=3e-3)  # tied: once
    losses = []
    for _ in range(25):
        loss, _ = term(LossInputs(masked=masked_tokens(tiny_encoder, head, masking, seed=0)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5


def test_the_head_loads_a_checkpoints_own_weights_and_saves_with_the_model(tiny_encoder, tmp_path):
    from transformers import BertForMaskedLM

    pretrained = BertForMaskedLM(tiny_encoder.backbone.config)
    torch.nn.init.normal_(pretrained.cls.predictions.transform.dense.weight)
    pretrained.save_pretrained(tmp_path / "hf")  # a Hugging Face checkpoint with cls.predictions.*
    head = MlmHead(tiny_encoder.backbone)
    assert head.load_from(str(tmp_path / "hf"))
    assert torch.equal(head.head.predictions.transform.dense.weight, pretrained.cls.predictions.transform.dense.weight)
    assert head.head.predictions.decoder.weight is tiny_encoder.input_embeddings()  # still the model's own
    tiny_encoder.mlm_head = head
    tiny_encoder.save(tmp_path / "raw")  # a raw encoder's directory keeps its trained head
    again = MlmHead(tiny_encoder.backbone)
    assert again.load_from(str(tmp_path / "raw"))
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), head.state_dict().values(), strict=True))
    assert not MlmHead(tiny_encoder.backbone).load_from(str(tmp_path / "empty"))  # none: the architecture's init


def test_invalid_rates_and_missing_inputs_are_rejected():
    with pytest.raises(ValueError, match="probability"):
        LOSSES.build("mlm", probability=0.0)
    with pytest.raises(ValueError, match="sum"):
        LOSSES.build("mlm", mask_replace_prob=0.8, random_replace_prob=0.3)
    with pytest.raises(ValueError, match="masked tokens"):
        LOSSES.build("mlm")(LossInputs(torch.randn(2, 4)))


def test_the_collator_masks_the_original_sentences_not_the_views(tiny_encoder):
    """CLEAR masks the original sentences, not the augmented views the contrastive term sees."""
    from cselab.config import ViewsConfig
    from cselab.data.collate import Collator
    from cselab.data.views import ViewBuilder

    class Deleter:
        def augment(self, sentences, seed):
            return ["[DEL] " + " ".join(s.split()[1:]) for s in sentences]

    views = ViewBuilder(ViewsConfig(), ["x", "y"], seed=0)
    views.anchor = views.positive = Deleter()
    collator = Collator(tiny_encoder.tokenize, views, passes={"masked": MlmMasking(tiny_encoder.tokenizer)})
    sentences = ["the cat sat on the mat", "a dog ran across the field"]
    batch = collator((0, sentences))
    originals = tiny_encoder.tokenize(sentences)["input_ids"]
    unmasked = batch.masked.features["input_ids"].clone().reshape(-1)
    unmasked[batch.masked.positions] = batch.masked.labels
    assert torch.equal(unmasked.view_as(originals), originals)
    assert not torch.equal(batch.features["input_ids"][:2, :originals.shape[1]], originals)
