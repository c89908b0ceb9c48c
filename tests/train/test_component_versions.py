"""Components carry a version (issue 40): a checkpoint keeps each component's, a component saved in
another version of its layout is refused by name, and a component the checkpoint lacks (added since it
was written) starts fresh instead of refusing the whole checkpoint."""
from __future__ import annotations

import json

import pytest
import torch

from cselab.train import checkpoint as ckpt


class Counter:
    """A component with a state of its own."""

    version = 1

    def __init__(self, count: int = 0):
        self.count = count

    def state_dict(self) -> dict:
        return {"count": torch.tensor(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.count = int(state["count"])


class CounterV2(Counter):
    version = 2


def save(tmp_path, components: dict) -> ckpt.SavedRun:
    states = {name: c.state_dict() for name, c in components.items()}
    versions = {name: c.version for name, c in components.items()}
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot(states, {"step": 3}, None, versions))
    return ckpt.read_checkpoint(path)


def test_each_component_comes_back_with_its_version(tmp_path):
    saved = save(tmp_path, {"a": Counter(4), "b": CounterV2(5)})
    assert saved.versions == {"a": 1, "b": 2}
    assert json.loads((saved.path / "state.json").read_text())["versions"] == {"a": 1, "b": 2}
    a, b = Counter(), CounterV2()
    ckpt.restore({"a": a, "b": b}, saved)
    assert (a.count, b.count) == (4, 5)


def test_a_component_added_since_the_checkpoint_starts_fresh(tmp_path, caplog):
    saved = save(tmp_path, {"a": Counter(4)})
    a, added = Counter(), Counter(9)
    with caplog.at_level("INFO", logger="cselab.train.checkpoint"):
        ckpt.restore({"a": a, "queue.rows": added}, saved)
    assert a.count == 4 and added.count == 9  # the checkpoint's state restored; the new one kept as built
    assert "holds no queue.rows (added since it was written); it starts fresh" in caplog.text


def test_a_component_saved_in_another_version_is_refused_by_name(tmp_path):
    saved = save(tmp_path, {"a": Counter(4)})
    with pytest.raises(ckpt.CheckpointError, match=r"its a is version 1 of that state, this cselab reads version 2"):
        ckpt.restore({"a": CounterV2()}, saved)


def test_a_checkpoint_written_before_versions_reads_as_each_components_first(tmp_path):
    path = ckpt.write_snapshot(ckpt.CheckpointDir(tmp_path).snapshot({"a": Counter(4).state_dict()}, {"step": 1}))
    assert "versions" not in json.loads((path / "state.json").read_text())
    saved = ckpt.read_checkpoint(path)
    assert saved.versions == {"a": 1}
    again = Counter()
    ckpt.restore({"a": again}, saved)
    assert again.count == 4
