"""Two gloo processes with batch B equal one process with batch 2B: loss and gradients."""
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
from cselab.losses.base import LossInputs
from cselab.losses.infonce import InfoNCELoss
from cselab.train.distributed import gather_inputs

def model_and_data():
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 6)
    x = torch.randn(8, 8)       # global batch of 8 anchors
    y = x + 0.1 * torch.randn(8, 8)
    z = torch.randn(8, 8)       # hard negatives
    return layer, x, y, z

def step(layer, x, y, z):
    outputs = gather_inputs(LossInputs(anchor=layer(x), positive=layer(y), negative=layer(z)))
    loss, _ = InfoNCELoss(temperature=0.1)(outputs)
    loss.backward()  # the gather scales its own rows' gradient by the number of processes
    return loss.item()

mode = sys.argv[1]
layer, x, y, z = model_and_data()
if mode == "single":
    loss = step(layer, x, y, z)
    grads = [p.grad.tolist() for p in layer.parameters()]
else:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    rows = slice(rank * 8 // size, (rank + 1) * 8 // size)
    loss = step(layer, x[rows], y[rows], z[rows])
    for p in layer.parameters():   # what DDP does: average gradients
        dist.all_reduce(p.grad)
        p.grad /= size
    grads = [p.grad.tolist() for p in layer.parameters()]
    if rank != 0:
        dist.destroy_process_group(); sys.exit(0)
    dist.destroy_process_group()
print(json.dumps({"loss": loss, "grads": grads}))
'''


def test_two_processes_match_one_process_on_the_global_batch(tmp_path):
    script = tmp_path / "ddp_step.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "REPO_SRC": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    single = json.loads(subprocess.run([sys.executable, str(script), "single"], env=env, check=True,
                                       capture_output=True, text=True).stdout)
    multi_run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                                f"--master_port={free_port()}", str(script), "ddp"],
                               env=env, capture_output=True, text=True, timeout=120)
    assert multi_run.returncode == 0, multi_run.stderr[-2000:]
    multi = json.loads([line for line in multi_run.stdout.splitlines() if line.startswith("{")][0])
    assert multi["loss"] == pytest.approx(single["loss"], abs=1e-5)
    for a, b in zip(single["grads"], multi["grads"], strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5)
