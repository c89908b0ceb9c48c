"""The run's stateful components each save and load their own state (train/run_state.py), and a
checkpoint stores any component's state (train/checkpoint.py) and gives it back as it was."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from cselab.errors import ConfigError
from cselab.train import checkpoint as ckpt
from cselab.train.metrics import RunClock
from cselab.train.state import EncoderWeights, HeadWeights, LoaderPosition, RngStreams


def round_trip(tmp_path, states: dict) -> dict:
    """``states`` written as a checkpoint and read back."""
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot(states, {"step": 7, "config": {"a": 1}}))
    assert ckpt.verify(path)
    return ckpt.read_checkpoint(path).states


def test_a_component_state_comes_back_with_its_types(tmp_path):
    state = {"ints": {0: {"t": torch.arange(3)}, 5: {"x": 1.5}}, "list": [1, [2, torch.ones(2, 2)], "s"],
             "none": None, "inf": math.inf, "flag": True, "empty": {}, "bf16": torch.ones(3, dtype=torch.bfloat16)}
    again = round_trip(tmp_path, {"thing": state})["thing"]
    assert set(again["ints"]) == {0, 5}  # integer keys stay integers (an optimiser's parameter ids)
    assert torch.equal(again["ints"][0]["t"], torch.arange(3)) and again["ints"][5] == {"x": 1.5}
    assert again["list"][0] == 1 and torch.equal(again["list"][1][1], torch.ones(2, 2)) and again["list"][2] == "s"
    assert again["none"] is None and again["inf"] == math.inf and again["flag"] is True and again["empty"] == {}
    assert again["bf16"].dtype == torch.bfloat16


def test_a_matrix_with_many_zero_rows_is_stored_by_its_other_rows(tmp_path):
    sparse = torch.zeros(8, 3)
    sparse[2] = 1.0
    empty = torch.zeros(0, 3)
    ints = torch.zeros(6, 2, dtype=torch.int64)
    again = round_trip(tmp_path, {"m": {"sparse": sparse, "empty": empty, "ints": ints}})["m"]
    assert torch.equal(again["sparse"], sparse) and again["empty"].shape == (0, 3) and torch.equal(again["ints"], ints)
    stored = load_file(str(ckpt.list_checkpoints(tmp_path)[-1] / "m.safetensors"))
    assert stored["sparse.rows"].shape == (1, 3) and stored["sparse.index"].tolist() == [2]


def test_a_component_that_does_not_fit_fails_naming_the_checkpoint_and_the_component(tmp_path):
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot(
        {"encoder": torch.nn.Linear(2, 2).state_dict()}, {"step": 1}))
    with pytest.raises(ckpt.CheckpointError, match=r"step-00000001: its encoder does not fit this run \(.*size"):
        ckpt.restore({"encoder": EncoderWeights(torch.nn.Linear(3, 2))}, ckpt.read_checkpoint(path))


def test_a_checkpoint_of_the_earlier_layout_is_refused_in_one_line(tmp_path):
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot({}, {"step": 3}))
    state = ckpt.read_state(path)
    del state["format"]
    (path / "state.json").write_text(json.dumps(state))
    with pytest.raises(ckpt.CheckpointError, match="written by an earlier cselab in another layout; .*--no-resume"):
        ckpt.read_checkpoint(path)


def test_the_rng_streams_resume_where_they_were():
    streams = RngStreams()
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    state = streams.state_dict()
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    streams.load_state_dict(state)
    again = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]


def test_every_gpus_generator_is_saved_and_restored(monkeypatch):
    """The CUDA path, on a CPU: each device's generator state is kept, and given back to that device."""
    states = [torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3, 4], dtype=torch.uint8)]
    restored = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: list(states))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.update({device: state}))
    state = RngStreams().state_dict()
    assert [s.tolist() for s in state["ranks"][0]["cuda"]] == [[1, 2], [3, 4]]
    RngStreams().load_state_dict(state)
    assert {d: s.tolist() for d, s in restored.items()} == {0: [1, 2], 1: [3, 4]}


def test_a_checkpoint_of_another_number_of_processes_is_refused_on_every_process():
    state = RngStreams().state_dict()
    for rank in (0, 1):  # rank 0 too: it must not carry on alone while the others stop
        with pytest.raises(ConfigError, match="saved by 1 process, resumed by 2: resume with as many"):
            RngStreams(rank=rank, processes=2).load_state_dict(state)


def test_the_loader_position_refuses_other_data():
    saved = LoaderPosition("corpus-a", None, "c.txt", 10)
    saved.advance(3, 8)
    state = saved.state_dict()
    resumed = LoaderPosition("corpus-a", None, "c.txt", 10)
    resumed.load_state_dict(state)
    assert (resumed.step, resumed.sentences_seen, resumed.resumed_from) == (4, 8, 4) and not resumed.last
    with pytest.raises(ConfigError, match="c.txt: the corpus changed since the checkpoint"):
        LoaderPosition("corpus-b", None, "c.txt", 10).load_state_dict(state)
    with pytest.raises(ConfigError, match="another WordPiece vocabulary"):
        LoaderPosition("corpus-a", "vocabulary-x", "c.txt", 10).load_state_dict(state)


def test_the_clock_counts_every_invocation():
    first = RunClock()
    first.trained(2.0, 0.5)
    state = first.state_dict()
    second = RunClock()
    second.load_state_dict(state)
    second.trained(1.0, 0.25)
    assert (second.train_seconds, second.loader_wait_seconds) == (3.0, 0.75)
    assert second.wall_seconds() >= state["wall_seconds"]


class TiedModel(torch.nn.Module):
    """A backbone and a head whose decoder is tied to the backbone's embeddings (an MLM head's)."""

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Embedding(5, 3)
        self.head = torch.nn.Linear(3, 5)
        self.head.weight = self.backbone.weight
        self.extra = torch.nn.Linear(3, 2)


def test_head_weights_store_a_tied_tensor_once_and_load_it_back(tmp_path):
    torch.manual_seed(0)
    model = TiedModel()
    states = {"encoder": EncoderWeights(model.backbone).state_dict(),
              "heads": HeadWeights(model, model.backbone).state_dict()}
    assert set(states["heads"]["tensors"]) == {"head.bias", "extra.weight", "extra.bias"}
    assert states["heads"]["aliases"] == {"head.weight": "backbone.weight"}
    saved = round_trip(tmp_path, states)
    fresh = TiedModel()
    ckpt.restore({"encoder": EncoderWeights(fresh.backbone), "heads": HeadWeights(fresh, fresh.backbone)},
                 ckpt.SavedRun(tmp_path, {"step": 7}, saved))
    for name, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], value), name
    assert fresh.head.weight is fresh.backbone.weight  # still tied


def test_head_weights_missing_from_the_checkpoint_are_an_error():
    model = TiedModel()
    state = HeadWeights(model, model.backbone).state_dict()
    del state["tensors"]["extra.bias"]
    other = TiedModel()
    with pytest.raises(KeyError, match="missing weights extra.bias"):
        HeadWeights(other, other.backbone).load_state_dict(state)


def test_states_a_checkpoint_cannot_hold_fail_when_taken_not_in_the_writer(tmp_path):
    directory = ckpt.CheckpointDir(tmp_path)
    with pytest.raises(ckpt.CheckpointError, match="two tensors at a.b"):
        directory.snapshot({"m": {"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}}}, {"step": 1})
    with pytest.raises(TypeError):  # no JSON for a NumPy scalar: raised in the loop, where it was made
        directory.snapshot({"m": {"x": np.float32(1.0)}}, {"step": 2})


def test_a_name_the_sparse_form_would_use_keeps_a_matrix_dense(tmp_path):
    sparse, other = torch.zeros(8, 2), torch.ones(3)
    again = round_trip(tmp_path, {"m": {"w": sparse, "w.rows": other}})["m"]
    assert torch.equal(again["w"], sparse) and torch.equal(again["w.rows"], other)
