"""How long the training loop is held per checkpoint: written in the loop (before) or by the background writer (after).

    python benchmarks/bench_checkpoint_stall.py [--device cuda|cpu] [--saves 3] [--layers 12 --hidden 768]

A BERT-base-shaped encoder (12 layers x 768, BERT's 30,522-token vocabulary; from its config, random
weights) with AdamW state after one update (the moments of the word embeddings zero in the rows of
tokens never seen, as in a real run, so their sparse storage is exercised), checkpointed as the
loop does (the run's components' states, cselab.train.checkpoint: snapshot, then the writer). For
each save: the time the loop is held (synchronous: the whole write; background: the host copy, plus
any wait for the previous write), and for the background writer the time until the checkpoint is on
disk. The loop is not training between saves here, so those times are the writer's alone; on a CPU
a real loop shares its cores with the writer while it writes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _common import write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from cselab.train import checkpoint as ckpt  # noqa: E402
from cselab.train.optimizer import OptimizerStep  # noqa: E402
from cselab.train.state import EncoderWeights, HeadWeights, RngStreams  # noqa: E402


def build(layers: int, hidden: int, device: torch.device, seen_tokens: int):
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=max(1, hidden // 64),
                        intermediate_size=4 * hidden)
    torch.manual_seed(0)
    model = torch.nn.Module()
    model.backbone = BertModel(config, add_pooling_layer=False)
    model.mlp = torch.nn.Linear(hidden, hidden)  # SimCSE's training MLP: the checkpoint's heads file
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter) * 1e-3
    model.backbone.embeddings.word_embeddings.weight.grad[seen_tokens:] = 0  # unseen tokens: zero moments
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return model, optimizer, scheduler


def measure(background: bool, saves: int, model, optimizer, scheduler, directory: Path, device: torch.device) -> dict:
    held, on_disk = [], []
    # The components a training run saves (train/components.py), less those with a few numbers of state.
    components = {"encoder": EncoderWeights(model.backbone), "heads": HeadWeights(model, model.backbone),
                  "optimizer": OptimizerStep(optimizer, scheduler, list(model.parameters()), 1.0), "rng": RngStreams()}
    with ckpt.CheckpointWriter(background) as writer:
        for step in range(1, saves + 1):
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.add_(1e-4)  # a training step's change: every snapshot is of new values
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            writer.wait()  # as saving.Checkpointing.save: one host copy at a time
            states = {name: component.state_dict() for name, component in components.items()}
            writer.save(ckpt.CheckpointDir(directory).snapshot(states, {"step": step, "bench": True}))
            returned = time.perf_counter()
            writer.wait()
            done = time.perf_counter()
            held.append(returned - start)
            on_disk.append(done - start)
    newest = ckpt.list_checkpoints(directory)[-1]
    assert ckpt.verify(newest), f"{newest} does not match its manifest"
    size = sum(p.stat().st_size for p in newest.iterdir())
    return {"held_seconds": held, "on_disk_seconds": on_disk, "checkpoint_bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--saves", type=int, default=3, help="checkpoints per way of writing")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--seen-tokens", type=int, default=20000, help="word-embedding rows with non-zero moments")
    args = parser.parse_args()
    device = torch.device(args.device)
    model, optimizer, scheduler = build(args.layers, args.hidden, device, args.seen_tokens)
    parameters = sum(p.numel() for p in model.parameters())
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, background in (("synchronous (before)", False), ("background writer (after)", True)):
            results[name] = measure(background, args.saves, model, optimizer, scheduler, Path(tmp) / name, device)
    rows = []
    for name, r in results.items():
        rows.append([name, round(statistics.median(r["held_seconds"]), 3), round(max(r["held_seconds"]), 3),
                     round(statistics.median(r["on_disk_seconds"]), 3), round(r["checkpoint_bytes"] / 1e6, 1)])
    before = statistics.median(results["synchronous (before)"]["held_seconds"])
    after = statistics.median(results["background writer (after)"]["held_seconds"])
    flags = f"--device {args.device} --saves {args.saves}"
    if (args.layers, args.hidden) != (12, 768):
        flags += f" --layers {args.layers} --hidden {args.hidden}"
    notes = (f"Command: `python benchmarks/bench_checkpoint_stall.py {flags}`. {args.layers}x{args.hidden} BERT "
             f"({parameters / 1e6:.1f}M parameters) with AdamW state, on {args.device}; {args.saves} checkpoints each "
             f"way, medians. The loop is held {before / after:.1f}x shorter per checkpoint with the background writer. "
             f"'on disk' is from the save's start until its manifest and rename are durable; the background writer's "
             f"held time is the host copy of every tensor. Nothing trains between saves here: on a CPU a real loop "
             f"shares its cores with the writer while it writes, on a GPU it does not.")
    data = {"device": args.device, "layers": args.layers, "hidden": args.hidden, "parameters": parameters,
            "seen_tokens": args.seen_tokens, "saves": args.saves, "results": results,
            "held_ratio_before_after": round(before / after, 2)}
    print(write_results(f"checkpoint_stall_{args.device}", data,
                        f"Training loop held per checkpoint, BERT-base shape with AdamW state ({args.device})",
                        ["checkpoint written", "loop held (s, median)", "loop held (s, max)",
                         "on disk after (s, median)", "checkpoint (MB)"], rows, notes))


if __name__ == "__main__":
    main()
