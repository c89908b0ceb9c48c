"""ESimCSE under torchrun: 2 gloo processes x batch 4 train like 1 process x batch 8, the queue holding
the global batch's keys (gathered in rank order, the same on every process) and the momentum encoder
the same EMA."""

import torch
from safetensors.torch import load_file

from cselab.train import checkpoint as ckpt
from tests.conftest import TINY_BERT
from tests.scale.test_multiprocess_training import _args as two_process_args
from tests.scale.test_multiprocess_training import train_one_and_two_processes

QUEUE = 12  # 1.5 global batches: after 3 steps the oldest 12 keys are gone
ESIMCSE = ("train.save_steps=3",
           f"objective=[{{name: esimcse, temperature: 0.05, momentum: 0.995, queue_size: {QUEUE}}}]")


def _args(corpus, out, batch):
    return two_process_args(corpus, out, batch, recipe="esimcse", extra=ESIMCSE)


def test_two_processes_keep_the_global_batch_queue_of_one_process(tmp_path, tiny_corpus):
    losses = train_one_and_two_processes(tmp_path, tiny_corpus, _args)
    assert len(losses[0]) == 3 and all(abs(a - b) < 1e-5 for a, b in zip(*losses, strict=True))
    one, two = (ckpt.read_checkpoint(tmp_path / run / "checkpoints" / "step-00000003").states for run in ("one", "two"))
    queue_one, queue_two = one["momentum_keys.queue"]["keys"], two["momentum_keys.queue"]["keys"]
    assert queue_one.shape == queue_two.shape == (QUEUE, TINY_BERT["hidden_size"])
    # Each process pads to its own longest sentence, so the keys differ by float rounding only.
    assert torch.allclose(queue_one, queue_two, atol=1e-5)
    assert not torch.allclose(queue_two[:4], queue_two[4:8], atol=1e-3)  # the two processes' rows, not one's twice
    momentum_one, momentum_two = (states["momentum_keys.momentum_encoder"]["weights"] for states in (one, two))
    assert max((momentum_one[k] - momentum_two[k]).abs().max().item() for k in momentum_one) < 1e-5
    # Every process computed its loss with that queue: the weights are the single process's.
    a, b = (load_file(str(tmp_path / "one" / "model.safetensors")),
            load_file(str(tmp_path / "two" / "model.safetensors")))
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5
