"""Under DistributedDataParallel every trainable parameter gets a gradient in every step.

DDP (``find_unused_parameters=False``, the default cselab keeps: the other setting walks the autograd
graph every step) stops at the second step when a trainable parameter got no gradient: "Expected to
have finished reduction in the prior iteration". Hugging Face poolers (cselab pools itself), the
SimCSE MLP and projection heads of an MLM-only objective were such parameters. Each case trains 3
steps in 2 gloo processes under torchrun.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import TINY_BERT, free_port

SMALL = {k: v for k, v in TINY_BERT.items() if k != "model_type"}


def tiny_mpnet(directory):
    """A saved MPNet-shaped model (its own pooler in the checkpoint, as sentence-transformers' MPNets have)
    with the MiniLM tokenizer's vocabulary."""
    import torch
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    from cselab.sources import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    config = MPNetConfig(**{**SMALL, "max_position_embeddings": 66}, vocab_size=len(tokenizer),
                         pad_token_id=tokenizer.pad_token_id)
    MPNetModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


CASES = {
    "mpnet_from_pretrained": lambda tmp: ["--set", f"model.name_or_path={tiny_mpnet(tmp / 'mpnet')}"],
    "roberta_from_config": lambda tmp: ["--set", "model.from_config=" + json.dumps({"model_type": "roberta", **SMALL,
                                                                                    "max_position_embeddings": 66})],
    "mlm_only_with_mlp_and_projection": lambda tmp: [
        "--set", f"model.from_config={json.dumps(TINY_BERT)}", "--set", "model.mlp=true",
        "--set", "model.projection=clear_mlp", "--set", "objective=[{name: mlm, weight: 1.0}]"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_processes_train_three_steps_with_no_parameter_left_without_gradient(case, tmp_path, tiny_corpus):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    args = ["train", "--corpus", str(tiny_corpus), "--output-dir", str(tmp_path / "run"), "--max-steps", "3",
            "--set", "optim.batch_size=4", "--set", "train.precision=fp32", "--set", "train.eval_steps=0",
            "--set", "train.save_steps=0", "--set", "train.log_steps=1", *CASES[case](tmp_path)]
    port = free_port()
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
                          "-m", "cselab.cli", *args], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3]
