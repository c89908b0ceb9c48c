"""The view roles are declared once, as the marked fields of LossInputs (losses/base.py); the collator's
rows and the step's inputs follow that declaration (the recipe check: tests/losses/test_term_contract.py)."""
from __future__ import annotations

import dataclasses

import torch

from cselab.config import load_config
from cselab.data.collate import Collator
from cselab.data.views import ViewBuilder
from cselab.losses.base import VIEW_ROLES as ROLE_REGISTRY
from cselab.losses.base import LossInputs

VIEW_ROLES = ROLE_REGISTRY.names()  # the package's own roles, in the rows' order


def test_roles_are_the_marked_fields_in_row_order():
    marked = [f.name for f in dataclasses.fields(LossInputs) if f.metadata.get("view")]
    assert VIEW_ROLES == marked
    assert VIEW_ROLES[:2] == ["anchor", "positive"]  # the rows every contrastive step has, first
    assert "labels" not in VIEW_ROLES and "masked" not in VIEW_ROLES  # not encoded rows


def test_a_batch_with_every_role_lays_its_rows_out_in_the_declared_order(tiny_encoder):
    config = load_config("simcse", ["views.negative=eda_random_deletion", "views.label=[random_crop, word_repetition]"])
    sentences = ["the cat sat on the mat today", "a dog ran far away from home", "it rained all day long here"]
    batch = Collator(tiny_encoder.tokenize, ViewBuilder(config.views, sentences, seed=0),
                     reads=frozenset({"negative_positive"}))((0, sentences))
    assert list(batch.roles) == list(VIEW_ROLES)  # every role present, in order, rows back to back
    starts = [batch.roles[role].start for role in VIEW_ROLES]
    assert starts == sorted(starts) and batch.roles[VIEW_ROLES[-1]].stop == len(batch.features["input_ids"])
    assert all(batch.roles[role].stop - batch.roles[role].start == len(sentences) for role in VIEW_ROLES)


def test_the_step_hands_each_role_its_rows(tiny_encoder):
    from cselab.losses import build_objective
    from cselab.train.steps import StepForward

    config = load_config("simcse", ["views.negative=eda_random_deletion", "views.label=[random_crop]"])
    sentences = ["the cat sat on the mat today", "a dog ran far away from home"]
    batch = Collator(tiny_encoder.tokenize, ViewBuilder(config.views, sentences, seed=0),
                     reads=frozenset({"negative_positive"}))((0, sentences))
    seen = {}

    def objective(inputs):
        seen.update({role: getattr(inputs, role) for role in VIEW_ROLES})
        seen["labels"] = inputs.labels
        return inputs.anchor.sum(), {}

    spy = build_objective([{"name": "infonce"}])
    spy.forward = objective  # records what the step hands the objective
    module = StepForward(tiny_encoder, torch.nn.Identity(), spy, torch.device("cpu"), "fp32")
    embeddings = torch.arange(len(batch.features["input_ids"]), dtype=torch.float32).unsqueeze(1).repeat(1, 4)
    module.loss(embeddings, batch)
    for role in VIEW_ROLES:  # row i of the batch is embedding i: each role got exactly its own rows
        assert seen[role][:, 0].tolist() == list(range(batch.roles[role].start, batch.roles[role].stop)), role
    assert torch.equal(seen["labels"], batch.labels)

