"""Two gloo processes under torchrun give one process's gradients on the global batch, through the
real step strategies: the plain step and the GradCache step (DDP with ``no_sync`` over its chunks),
with AugCSE's batch-norm head (normalised over the global batch, not per process)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import free_port

SCRIPT = r'''
import json, os, sys
import torch, torch.distributed as dist
sys.path.insert(0, os.environ["REPO_SRC"])
from cselab.data.collate import Batch
from cselab.losses import build_objective
from cselab.model.encoder import SentenceEncoder
from cselab.model.heads import build_head
from cselab.train.steps import GradCacheStep, PlainStep, StepForward

TINY = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0}
WORDS = ["red", "blue", "cat", "dog", "runs", "sleeps", "the", "a", "tree", "house", "big", "small"]
GLOBAL = 16

def sentences():
    g = torch.Generator().manual_seed(1)
    return [" ".join(WORDS[i] for i in torch.randint(0, len(WORDS), (int(torch.randint(2, 9, (1,), generator=g)),),
                                                      generator=g)) for _ in range(GLOBAL)]

def step_grads(kind, rows):
    torch.manual_seed(0)
    # torch's initialisation of the MLP: the gradients' scale the tolerances below were set for (BERT's
    # makes them 10x larger, and fp32's summation-order differences with them)
    encoder = SentenceEncoder.from_config(TINY, "minilm", pooler="cls", head_init="pytorch")
    head = build_head("diffcse_mlp", encoder.hidden_size)
    objective = build_objective([{"name": "infonce", "temperature": 0.05}])
    forward = StepForward(encoder, head, objective, torch.device("cpu"), "fp32")
    n = len(rows)
    batch = Batch(step=0, num_sentences=n, features=dict(encoder.tokenize(rows + rows)),
                  roles={"anchor": slice(0, n), "positive": slice(n, 2 * n)})
    step = PlainStep(forward) if kind == "plain" else GradCacheStep(forward, chunk_size=3)
    loss = step(batch).loss.item()
    return {"loss": loss, "grads": {name: p.grad.tolist() for name, p in forward.named_parameters()
                                    if p.grad is not None}}

everything = sentences()
if sys.argv[1] == "single":
    out = {kind: step_grads(kind, everything) for kind in ("plain", "gradcache")}
else:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    share = GLOBAL // size
    out = {kind: step_grads(kind, everything[rank * share:(rank + 1) * share]) for kind in ("plain", "gradcache")}
    if rank:
        out = None
    dist.destroy_process_group()
if out is not None:
    print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp_steps")
    script = folder / "ddp_steps.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "REPO_SRC": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    single = subprocess.run([sys.executable, str(script), "single"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    multi = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                            f"--master_port={free_port()}", str(script), "ddp"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert multi.returncode == 0, multi.stderr[-3000:]
    line = next(line for line in multi.stdout.splitlines() if line.startswith("{"))
    return json.loads(single.stdout.strip().splitlines()[-1]), json.loads(line)


def _assert_same(one: dict, two: dict) -> None:
    assert two["loss"] == pytest.approx(one["loss"], abs=1e-5)
    assert set(one["grads"]) == set(two["grads"])
    assert any(name.startswith("head.") for name in one["grads"])  # the batch-norm head is trained
    for name, grad in one["grads"].items():
        assert torch.allclose(torch.tensor(grad), torch.tensor(two["grads"][name]), atol=1e-5, rtol=1e-4), name


def test_plain_step_on_two_processes_gives_the_global_batch_gradients_with_a_batch_norm_head(results):
    """Fails with per-process batch norm: each process's half of the batch has its own statistics."""
    single, multi = results
    _assert_same(single["plain"], multi["plain"])


def test_gradcache_under_ddp_gives_the_global_batch_gradients(results):
    """GradCache with 3-row chunks on 2 processes (DDP's no_sync for all chunks but the last; the
    head's parameters under their own DDP) equals one plain step over all 16 sentences."""
    single, multi = results
    _assert_same(single["plain"], multi["gradcache"])
    _assert_same(single["plain"], single["gradcache"])
