"""The validation split: a fixed rule, held-out lines never trained on, and their MLM loss logged at
every evaluation (and at the end), the same masks every time, the best model kept by it."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cselab.data.split import hold_out
from cselab.train.rank import RankContext
from cselab.train.setup import build_setup, make_loader
from tests.pretrain.conftest import minilm_tokenizer, pretrain_config, write_lines, year_tokens


def test_the_split_is_a_fixed_rule_of_the_line_position():
    split = hold_out(10_000, 0.05)
    assert np.array_equal(split.validation, hold_out(10_000, 0.05).validation)
    assert len(split.validation) == pytest.approx(500, abs=60)
    assert np.array_equal(np.sort(np.concatenate([split.train, split.validation])), np.arange(10_000))
    longer = hold_out(12_000, 0.05)  # lines appended to the corpus: the earlier ones stay where they were
    assert np.array_equal(longer.validation[longer.validation < 10_000], split.validation)
    assert len(hold_out(30, 0.01).validation) == 1  # a fraction above 0 always holds out a line
    assert len(hold_out(30, 0.0).validation) == 0


def original_ids(masked) -> set[int]:
    """The token ids of a masked batch before masking (the labels put back at the masked positions)."""
    ids = masked.features["input_ids"].clone().reshape(-1)
    ids[masked.positions] = masked.labels
    return set(ids.tolist())


@pytest.mark.parametrize("packing", [True, False])
def test_held_out_lines_never_reach_a_training_batch(tmp_path, packing):
    """Each line carries a year token of its own: those of held-out lines are in the validation
    batches and in no batch of any step of the run."""
    lines = write_lines(tmp_path / "lines.txt", count=60)
    config = pretrain_config(tmp_path / "lines.txt", tmp_path / "run", **{"data.packing": packing,
                                                                          "data.validation_fraction": 0.15,
                                                                          "optim.epochs": 2, "optim.max_steps": "null"})
    parts = build_setup(config, torch.device("cpu"))
    tokenizer = minilm_tokenizer()
    year_ids = tokenizer.convert_tokens_to_ids(year_tokens(tokenizer, len(lines)))
    held_out = hold_out(len(lines), 0.15).validation
    held_out_ids = {year_ids[i] for i in held_out}
    assert 3 <= len(held_out_ids) <= 20
    seen = set()
    for batch in make_loader(parts, config.train, 0, RankContext(torch.device("cpu"), config.train.output_dir)):
        seen |= original_ids(batch.masked)
    assert len(seen & set(year_ids)) == len(lines) - len(held_out)  # every training line was read
    assert not seen & held_out_ids
    validation = set().union(*(original_ids(masked) for masked in parts.validation))
    assert validation & set(year_ids) == held_out_ids
    assert parts.corpus_stats.skipped["held_out_for_validation"] == len(held_out)


def test_validation_masks_are_fixed_whatever_the_run_seed(tmp_path):
    corpus, cpu = tmp_path / "lines.txt", torch.device("cpu")
    write_lines(corpus, count=60)
    first = build_setup(pretrain_config(corpus, tmp_path / "a", **{"train.seed": 1}), cpu)
    other = build_setup(pretrain_config(corpus, tmp_path / "b", **{"train.seed": 2}), cpu)
    assert len(first.validation) >= 1
    for a, b in zip(first.validation, other.validation, strict=True):
        assert torch.equal(a.features["input_ids"], b.features["input_ids"]) and torch.equal(a.labels, b.labels)


def test_validation_loss_is_logged_at_each_evaluation_and_the_end_and_picks_the_best_model(tmp_path):
    from cselab.train.loop import train

    write_lines(tmp_path / "lines.txt", count=60)
    out = tmp_path / "run"
    train(pretrain_config(tmp_path / "lines.txt", out, **{"train.eval_steps": 3, "optim.max_steps": 8}), progress=False)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = {r["step"]: r for r in records if "val_mlm_loss" in r}
    assert sorted(evaluated) == [3, 6, 8]  # every 3 steps, and the last step
    assert all(0 <= r["val_mlm_acc"] <= 1 and np.isfinite(r["val_mlm_loss"]) for r in evaluated.values())
    best = min(evaluated.values(), key=lambda r: r["val_mlm_loss"])
    assert json.loads((out / "best_model.json").read_text()) == {"step": best["step"],
                                                                 "val_mlm_loss": best["val_mlm_loss"]}
    settings = json.loads((out / "cselab_config.json").read_text())
    assert settings["raw_encoder"] and "mlp" not in settings


def test_the_summary_names_the_validation_loss_that_chose_the_model(tmp_path):
    """Not as STS-B dev: an MLM-only run's best model is the one of the lowest validation loss."""
    from cselab.train.loop import train

    write_lines(tmp_path / "lines.txt", count=60)
    out = tmp_path / "run"
    summary = train(pretrain_config(tmp_path / "lines.txt", out, **{"train.eval_steps": 3, "optim.max_steps": 6}),
                    progress=False)
    best = json.loads((out / "best_model.json").read_text())
    assert summary["selected_by"] == "val_mlm_loss" and summary["best_stsb_dev"] is None
    assert summary["best_val_mlm_loss"] == best["val_mlm_loss"] and summary["best_step"] == best["step"]


def test_the_same_weights_score_the_same(tmp_path):
    from cselab.train.steps import StepForward
    from cselab.train.validation import ValidationMlm

    write_lines(tmp_path / "lines.txt", count=60)
    parts = build_setup(pretrain_config(tmp_path / "lines.txt", tmp_path / "run"), torch.device("cpu"))
    forward = StepForward(parts.encoder, parts.head, parts.objective, torch.device("cpu"), "fp32")
    validation = ValidationMlm(parts.validation, forward)
    parts.trainable.train()
    first = validation()
    assert parts.encoder.training  # evaluating leaves the model in training mode
    assert validation() == first and first["val_mlm_loss"] > 0
