"""The real training loop under torchrun: 2 gloo processes x batch 4 train like 1 process x batch 8."""
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file

from tests.conftest import TINY_BERT, free_port

# Without dropout both runs are deterministic, so any difference comes from the gather itself.
NO_DROPOUT = {**TINY_BERT, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def _args(corpus, out, batch, recipe: str = "simcse", extra: tuple[str, ...] = ("train.save_steps=0",)):
    """``cselab train`` for three steps of ``recipe`` without dropout (``extra``: more --set items)."""
    overrides = [f"model.from_config={json.dumps(NO_DROPOUT)}", f"optim.batch_size={batch}", "optim.lr=1e-4",
                 "train.precision=fp32", "train.eval_steps=0", "train.log_steps=1", *extra]
    args = ["train", "--recipe", recipe, "--corpus", str(corpus), "--output-dir", str(out), "--max-steps", "3"]
    for item in overrides:
        args += ["--set", item]
    return args


def train_one_and_two_processes(tmp_path, corpus, args=_args) -> list[list[float]]:
    """``args(corpus, out, batch)`` trained by one process x batch 8 (``tmp_path/one``) and by two gloo
    processes x batch 4 (``tmp_path/two``); each run's logged losses."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    single = subprocess.run([sys.executable, "-m", "cselab.cli", *args(corpus, tmp_path / "one", 8)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    multi = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                            f"--master_port={free_port()}",
                            "-m", "cselab.cli", *args(corpus, tmp_path / "two", 4)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert multi.returncode == 0, multi.stderr[-3000:]
    return [[json.loads(line)["loss"] for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
            for run in ("one", "two")]


def test_two_processes_train_like_one_process_with_the_global_batch(tmp_path, tiny_corpus):
    losses = train_one_and_two_processes(tmp_path, tiny_corpus)
    assert len(losses[0]) == 3 and all(abs(a - b) < 1e-5 for a, b in zip(*losses, strict=True))
    a, b = (load_file(str(tmp_path / "one" / "model.safetensors")),
            load_file(str(tmp_path / "two" / "model.safetensors")))
    assert a.keys() == b.keys()
    # Each process pads to its own longest sentence, so sums differ by float rounding (~1e-7);
    # Adam's normalised update carries that into the weights at a scale of lr x 1e-1 at most.
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


def test_a_two_process_run_resumes_exactly_with_each_process_dropout(tmp_path, tiny_corpus):
    """Dropout on: each process draws its own masks (seed + rank) and saves its own RNG state in the
    checkpoint, so a run resumed from step 3 ends with the weights of the uninterrupted run."""
    import shutil

    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "run"
    args = ["train", "--corpus", str(tiny_corpus), "--output-dir", str(out), "--max-steps", "6",
            "--set", f"model.from_config={json.dumps(TINY_BERT)}", "--set", "optim.batch_size=4",
            "--set", "train.precision=fp32", "--set", "train.eval_steps=0", "--set", "train.save_steps=3",
            "--set", "train.keep_checkpoints=2"]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                            f"--master_port={free_port()}",
               "-m", "cselab.cli", *args]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    uninterrupted = load_file(str(out / "model.safetensors"))
    checkpoints = sorted((out / "checkpoints").glob("step-*"))
    assert [p.name for p in checkpoints] == ["step-00000003", "step-00000006"]
    shutil.rmtree(checkpoints[-1])  # as if both processes had been killed after step 5
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout + resumed.stderr
    again = load_file(str(out / "model.safetensors"))
    assert all(torch.equal(uninterrupted[k], again[k]) for k in uninterrupted)


def test_missing_dev_data_stops_every_process_with_the_same_line(tmp_path, tiny_corpus):
    """Only the main process loads the dev data; what it finds missing (here SST-2 dev, for
    train.select_on's transfer_dev) is raised by every process alike, so no process waits in a
    collective for a main process that has stopped: each prints the one-line error and exits."""
    from tests.evaluate.senteval_files import make_senteval

    senteval = make_senteval(tmp_path / "senteval", per_class=4)
    (senteval / "SST" / "binary" / "sentiment-dev").unlink()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    args = [*_args(tiny_corpus, tmp_path / "run", 4), "--set", "train.eval_steps=2",
            "--set", f"data.dev_dir={senteval}", "--set", "train.select_on=[stsb_dev, transfer_dev]"]
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                            f"--master_port={free_port()}",
                          "-m", "cselab.cli", *args], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    line = f"cselab train: error: {senteval / 'SST' / 'binary' / 'sentiment-dev'}: not found"
    assert run.stderr.count(line) == 2, run.stderr[-3000:]
