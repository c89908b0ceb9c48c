"""Checkpoints stored compactly: weights once (hard link to the final model), optimizer moments
without their all-zero rows, only the newest ``train.keep_checkpoints`` kept, and all of it lossless."""
from __future__ import annotations

import torch
from safetensors.torch import load_file

from cselab.train import checkpoint as ckpt
from cselab.train.loop import train
from tests.reliability.conftest import STEPS, load_config_for, model_weights


def test_sparse_moment_rows_round_trip_bit_for_bit(tmp_path):
    moments = torch.randn(10, 4)
    moments[[1, 2, 3, 5, 8]] = 0.0
    moments[9, 2] = -0.0  # a negative zero is not "zero" bit for bit: its row must be kept
    state = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": moments, "exp_avg_sq": moments.abs()},
                       1: {"exp_avg": torch.randn(6, 2)}},  # no zero rows: stored dense
             "param_groups": [{"lr": 0.1, "params": [0, 1]}]}
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot({"optimizer": state}, {"step": 1}))
    stored = load_file(str(path / "optimizer.safetensors"))
    assert stored["state.0.exp_avg.rows"].shape == (5, 4)
    assert stored["state.0.exp_avg.index"].tolist() == [0, 4, 6, 7, 9]
    assert "state.1.exp_avg" in stored  # dense
    restored = ckpt.read_checkpoint(path).states["optimizer"]
    assert restored["param_groups"] == state["param_groups"]
    for pid, values in state["state"].items():
        for key, value in values.items():
            again = restored["state"][pid][key]
            assert again.dtype == value.dtype and torch.equal(again.view(torch.int32), value.view(torch.int32))


def test_one_checkpoint_kept_and_its_encoder_is_the_final_models_file(tmp_path, corpus_file):
    out_dir = tmp_path / "run"
    config = load_config_for(corpus_file, out_dir, **{"train.keep_checkpoints": 1})
    assert train(config, progress=False)["finished"]
    checkpoints = ckpt.list_checkpoints(out_dir / "checkpoints")
    assert [ckpt.checkpoint_step(p) for p in checkpoints] == [STEPS]
    encoder, final = checkpoints[0] / "encoder.safetensors", out_dir / "model.safetensors"
    assert encoder.stat().st_ino == final.stat().st_ino and encoder.stat().st_nlink == 2  # stored once


def test_saving_a_new_final_model_leaves_the_linked_checkpoint_intact(tmp_path, corpus_file):
    from cselab.model.encoder import SentenceEncoder

    out_dir = tmp_path / "run"
    train(load_config_for(corpus_file, out_dir, **{"train.keep_checkpoints": 1}), progress=False)
    newest = ckpt.list_checkpoints(out_dir / "checkpoints")[-1]
    assert (newest / "encoder.safetensors").stat().st_nlink == 2
    encoder = SentenceEncoder.from_pretrained(str(out_dir))
    with torch.no_grad():
        for parameter in encoder.backbone.parameters():
            parameter.add_(1.0)
    encoder.save(out_dir)  # as a later best model would
    assert (newest / "encoder.safetensors").stat().st_nlink == 1
    assert ckpt.verify(newest)  # the checkpoint's bytes still match its manifest


def test_resume_from_compact_checkpoints_is_exact(tmp_path, corpus_file, reference_run):
    """Crash after the step-9 checkpoint (moments stored sparse); the resumed run equals the reference."""
    import shutil

    out_dir = tmp_path / "run"
    shutil.copytree(reference_run, out_dir)
    shutil.rmtree(ckpt.list_checkpoints(out_dir / "checkpoints")[-1])  # as if killed before step 12's
    (out_dir / "model.safetensors").unlink()
    state = ckpt.read_state(ckpt.list_checkpoints(out_dir / "checkpoints")[-1])
    assert state[ckpt.SPARSE]["optimizer"]  # some moments stored by their non-zero rows
    train(load_config_for(corpus_file, out_dir), progress=False)
    reference, resumed = model_weights(reference_run), model_weights(out_dir)
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)
