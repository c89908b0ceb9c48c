"""Helpers for the reliability tests: a tiny fp32 training config, its CLI form, and weight comparison."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import TINY_BERT

STEPS = 12


def base_overrides(corpus: Path, out_dir: Path, **extra) -> list[str]:
    """12 steps of batch 8 on a tiny random BERT, fp32, a checkpoint every 3 steps (two kept, so a corrupt
    newest one has one to fall back on), no evaluation. The last step's checkpoint keeps the optimiser's
    state too (a finished run's leaves it out by default): these tests check every component's file."""
    settings = {"model.from_config": json.dumps(TINY_BERT), "data.corpus": str(corpus), "data.max_sentences": "null",
                "optim.batch_size": 8, "optim.lr": "1e-3", "optim.max_steps": STEPS, "train.precision": "fp32",
                "train.save_steps": 3,
                "train.keep_checkpoints": 2, "train.keep_optimizer_state": "true",
                "train.eval_steps": 0, "train.log_steps": 1, "train.num_workers": 0,
                "train.seed": 5, "train.output_dir": str(out_dir)}
    settings.update(extra)
    return [f"{key}={value}" for key, value in settings.items()]


def load_config_for(corpus: Path, out_dir: Path, **extra):
    from cselab.config import load_config

    return load_config("simcse", base_overrides(corpus, out_dir, **extra))


def cli_command(corpus: Path, out_dir: Path, **extra) -> list[str]:
    command = [sys.executable, "-m", "cselab.cli", "train"]
    for item in base_overrides(corpus, out_dir, **extra):
        command += ["--set", item]
    return command


def subprocess_env() -> dict:
    # One intra-op thread, as in this process (single_thread): equal sums need equal thread counts.
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def model_weights(out_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a saved model directory (backbone and the training MLP)."""
    weights = {f"model/{k}": v for k, v in load_file(str(out_dir / "model.safetensors")).items()}
    if (out_dir / "mlp.safetensors").is_file():
        weights.update({f"mlp/{k}": v for k, v in load_file(str(out_dir / "mlp.safetensors")).items()})
    return weights


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst <= atol, f"weights differ by up to {worst}"


def edit_checkpoint_state(checkpoint: Path, edit) -> None:
    """``edit(state)`` the checkpoint's state.json in place, its manifest digest updated so it still verifies
    (what an older version of cselab, or another vocabulary, would have written)."""
    from cselab.train import checkpoint as ckpt

    state = ckpt.read_state(checkpoint)
    edit(state)
    (checkpoint / "state.json").write_text(json.dumps(state))
    manifest = json.loads((checkpoint / ckpt.MANIFEST).read_text())
    manifest["state.json"] = ckpt._digest(checkpoint / "state.json")
    (checkpoint / ckpt.MANIFEST).write_text(json.dumps(manifest))
    assert ckpt.verify(checkpoint)


def metric_records(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


# Wall-clock speed differs between any two runs; everything else in a record must match.
TIMING_KEYS = {"model_tflops", "mfu", "window_seconds", "loader_wait"}  # clocks, not results


def assert_same_metrics(a: list[dict], b: list[dict], atol: float = 1e-5) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x.keys() - TIMING_KEYS:
            assert abs(x[key] - y[key]) <= atol * max(1.0, abs(x[key])), (x["step"], key, x[key], y[key])


def wait_for_step(process: subprocess.Popen, metrics: Path, step: int, limit_seconds: float = 120) -> int:
    """Poll metrics.jsonl until a record with ``step`` or later exists; returns that step."""
    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"training exited (code {process.returncode}) before step {step}")
        if metrics.is_file():
            lines = [line for line in metrics.read_text().splitlines() if line.endswith("}")]
            if lines and json.loads(lines[-1])["step"] >= step:
                return json.loads(lines[-1])["step"]
        time.sleep(0.005)
    raise AssertionError(f"no step {step} within {limit_seconds} s")


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    """120 generated sentences (never lines of ../shared)."""
    rng = random.Random(3)
    words = ("the cat dog bird teacher child river garden house letter song map apple ball sees likes paints "
             "finds follows builds reads carries slowly quickly again today tomorrow red small old").split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(120)]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def reference_run(corpus_file, tmp_path_factory) -> Path:
    """The uninterrupted run every resumed run is compared with."""
    from cselab.train.loop import train

    out_dir = tmp_path_factory.mktemp("reference") / "run"
    summary = train(load_config_for(corpus_file, out_dir), progress=False)
    assert summary["finished"] and summary["steps"] == STEPS
    return out_dir


class Crash(Exception):
    """Stands in for a crash in the middle of a step (match it by message: conftest may load twice)."""


CRASHED = "simulated crash"


@pytest.fixture
def crash_at(monkeypatch):
    """crash_at(k): the objective raises Crash while computing step k (1-based, as in metrics.jsonl)."""
    from cselab.train.steps import StepForward

    original = StepForward.loss

    def arm(step: int) -> None:
        def loss(self, embeddings, batch):
            if batch.step + 1 == step:
                raise Crash(f"{CRASHED} at step {step}")
            return original(self, embeddings, batch)

        monkeypatch.setattr(StepForward, "loss", loss)

    yield arm
    monkeypatch.setattr(StepForward, "loss", original)


@pytest.fixture
def stsb_dev_dir(tmp_path) -> Path:
    """A small generated STS-B dev file in SentEval's layout (tab separated, score in column 5)."""
    rng = random.Random(4)
    words = "cat dog bird child river garden house letter song map apple ball red small old".split()
    rows = []
    for i in range(40):
        left = [rng.choice(words) for _ in range(6)]
        right = [w if rng.random() < i / 40 else rng.choice(words) for w in left]
        rows.append("\t".join(["main-captions", "MSRvid", "2012test", f"{i:04d}", f"{5 * i / 39:.3f}",
                               " ".join(left), " ".join(right)]))
    path = tmp_path / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path / "senteval"


@pytest.fixture
def small_corpus(tmp_path) -> Path:
    """40 lines of 6 words from a small vocabulary (the new-user tests' corpus)."""
    words = "the cat dog bird river garden house letter song map apple ball sees likes reads red old".split()
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(6)) for i in range(40)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path
