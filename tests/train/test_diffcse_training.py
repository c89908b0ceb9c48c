"""The `diffcse` recipe end to end, offline on a CPU with a tiny encoder and a tiny local generator: it
trains (the discriminator in the optimizer and the checkpoint, the generator in neither, nor in the saved
model), resumes bit-identically after SIGKILL, runs under two gloo processes, and without its generator
stops at once with one line naming the key to set."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cselab import cli
from cselab.config import ConfigError, load_config
from tests.conftest import TINY_BERT, free_port, save_tiny_generator
from tests.evaluate.test_paper_setting import cache_fake_model
from tests.reliability.conftest import TIMING_KEYS, metric_records

STEPS = 12


def tiny_settings(corpus: Path, out: Path, generator: Path | str, **extra) -> list[str]:
    settings = {"model.from_config": json.dumps(TINY_BERT), "model.name_or_path": "minilm", "data.corpus": str(corpus),
                "optim.batch_size": 8, "optim.lr": "1e-3", "optim.max_steps": 3, "train.precision": "fp32",
                "train.eval_steps": 0, "train.save_steps": 3, "train.log_steps": 1, "train.num_workers": 0,
                "train.output_dir": str(out), "objective[1].generator": str(generator)}
    settings.update(extra)
    return [f"{key}={value}" for key, value in settings.items()]


def cli_args(settings: list[str]) -> list[str]:
    args = ["train", "--recipe", "diffcse"]
    for item in settings:
        args += ["--set", item]
    return args


def subprocess_env(tmp_path: Path) -> dict:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
            "CSELAB_CACHE": str(tmp_path / "cache"), "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture
def generator(tmp_path) -> Path:
    return save_tiny_generator(tmp_path / "generator")


def test_diffcse_trains_three_steps_offline_with_a_local_generator(tiny_corpus, generator, tmp_path, capsys):
    from cselab.train import checkpoint as ckpt

    out = tmp_path / "run"
    generator_files = {p.name: p.read_bytes() for p in generator.iterdir()}
    settings = tiny_settings(tiny_corpus, out, generator, **{"train.save_steps": 1, "train.keep_checkpoints": 3})
    assert cli.main(cli_args(settings)) == 0
    records = metric_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    for record in records:
        assert all(math.isfinite(record[key]) for key in ("loss", "infonce.loss", "rtd.loss", "rtd.acc"))
        assert record["loss"] == pytest.approx(record["infonce.loss"] + 0.005 * record["rtd.loss"], rel=1e-5)
        assert 0 < record["rtd.replaced"] <= 1
    # The discriminator and its head are trained and checkpointed; the generator is in no checkpoint.
    first, last = (ckpt.read_checkpoint(path).states["heads"]["tensors"]
                   for path in ckpt.list_checkpoints(out / "checkpoints")[::2])
    discriminator = [name for name in last if ".replaced.discriminator." in name]
    assert len(discriminator) > 20 and any(name.endswith("replaced.classifier.weight") for name in last)
    assert not [name for name in last if "generator" in name]
    assert any(not torch.equal(first[name], last[name]) for name in discriminator)
    # The saved model is the encoder alone (the discriminator is as wide and deep: its tensors would double it).
    saved = load_file(str(out / "model.safetensors"))
    assert len(saved) < len(discriminator) + 5 and not any("discriminator" in name for name in saved)
    # The generator's directory is read, never written.
    assert {p.name: p.read_bytes() for p in generator.iterdir()} == generator_files
    assert "DiffCSE" in (out / "README.md").read_text()  # the card cites the method


def wait_for_checkpoint(process: subprocess.Popen, directory: Path, limit_seconds: float = 240) -> None:
    """Poll until a complete checkpoint (its files matching its manifest) is in ``directory``."""
    import time

    from cselab.train import checkpoint as ckpt

    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"training exited (code {process.returncode}) before its first checkpoint")
        if directory.is_dir() and any(ckpt.verify(path) for path in ckpt.list_checkpoints(directory)):
            return
        time.sleep(0.005)
    raise AssertionError(f"no checkpoint within {limit_seconds} s")


def test_diffcse_resumes_bit_identically_after_sigkill(tiny_corpus, generator, tmp_path):
    env = subprocess_env(tmp_path)

    def command(out: Path) -> list[str]:
        return [sys.executable, "-m", "cselab.cli", *cli_args(tiny_settings(
            tiny_corpus, out, generator, **{"optim.max_steps": STEPS, "train.keep_checkpoints": 2}))]

    reference = tmp_path / "reference"
    done = subprocess.run(command(reference), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    out = tmp_path / "run"
    process = subprocess.Popen(command(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_checkpoint(process, out / "checkpoints")  # killed as soon as one is on disk: mid-run
        process.send_signal(signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out / "model.safetensors").exists()
    assert max(r["step"] for r in metric_records(out)) < STEPS

    rerun = subprocess.run(command(out), env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from" in rerun.stdout
    expected, resumed = load_file(str(reference / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert expected.keys() == resumed.keys()
    assert all(torch.equal(expected[name], resumed[name]) for name in expected)  # bit for bit
    ours, theirs = metric_records(out), metric_records(reference)
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == list(range(1, STEPS + 1))
    for mine, other in zip(ours, theirs, strict=True):
        assert {k: v for k, v in mine.items() if k not in TIMING_KEYS} == \
               {k: v for k, v in other.items() if k not in TIMING_KEYS}


def test_diffcse_runs_under_two_gloo_processes(tiny_corpus, generator, tmp_path):
    out = tmp_path / "run"
    settings = tiny_settings(tiny_corpus, out, generator, **{"optim.batch_size": 4, "train.save_steps": 0})
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          f"--master_port={free_port()}", "-m", "cselab.cli", *cli_args(settings)],
                         env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    records = metric_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(math.isfinite(r["rtd.loss"]) and math.isfinite(r["infonce.loss"]) for r in records)
    assert (out / "model.safetensors").is_file()


def test_offline_without_the_generator_the_run_stops_at_once_naming_the_key(tiny_corpus, tmp_path, capsys,
                                                                           monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    out = tmp_path / "run"
    missing_corpus = tmp_path / "no-such-corpus.txt"  # read only after the check: its error never shows
    settings = [item for item in tiny_settings(missing_corpus, out, "") if not item.startswith("objective[1]")]
    line = ("objective[1].generator: cannot load 'distilbert-base-uncased': no directory of that name, not in the "
            "Hugging Face cache, and the Hub is unreachable (HF_HUB_OFFLINE is set); pass a local masked-language "
            "model directory")
    assert cli.main(cli_args(settings)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"cselab train: error: {line}")
    assert not out.exists()
    # The same from the Python API: before the corpus is read.
    from cselab.train.loop import train

    with pytest.raises(ConfigError, match=r"^objective\[1\]\.generator: cannot load 'distilbert-base-uncased'"):
        train(load_config("diffcse", settings), progress=False)
    assert not out.exists()


def test_paper_setting_offline_names_the_generator_among_the_missing_pieces(offline_home, capsys):
    assert cli.main(["train", "--recipe", "diffcse", "--paper-setting"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cselab train: error: --paper-setting: missing model "
                                                   "bert-base-uncased (")
    assert "; objective[1].generator: cannot load 'distilbert-base-uncased': " in err
    assert "corpus" in err and "SentEval" in err
    assert list(offline_home.iterdir()) == []  # nothing written


def test_paper_setting_passes_the_papers_generator_through(tmp_path, monkeypatch):
    """With the paper's generator at hand (a Hugging Face cache entry standing in for it), the setting keeps
    the recipe's generator name: the run would load distilbert-base-uncased."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    cache_fake_model(tmp_path / "hub", "distilbert-base-uncased")  # the cache's layout of a downloaded model
    config = load_config("diffcse", cli.paper_setting_overrides())
    assert config.objective[1]["generator"] == "distilbert-base-uncased"
    assert config.model.name_or_path == "bert-base-uncased"
    from cselab.losses import model_problems

    assert model_problems(config.objective, ask_hub=True) == []


def test_cselab_recipes_lists_diffcse(capsys):
    assert cli.main(["recipes"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("diffcse "))
    assert "DiffCSE (Chuang et al. 2022)" in line
