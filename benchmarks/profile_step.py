"""Where a cselab SimCSE training step spends its time (torch.profiler), at the recipe's defaults.

    python benchmarks/profile_step.py [--steps 6] [--precision auto]

MiniLM-L6, batch 64, max_seq_len 32, the Wiki sample; 2 warm-up steps, then ``--steps`` profiled.
Self CPU time by operator group, written to benchmarks/results/step_profile.{json,md}.
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

GROUPS = {"matmul (mm, addmm, bmm, baddbmm)": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
          "GELU": ("aten::gelu", "aten::gelu_backward"),
          "index moves (unpadded layout)": ("aten::index_select", "aten::index_add_"),
          "copies and concatenation": ("aten::copy_", "aten::cat"),
          "dropout masks": ("aten::random_", "aten::bitwise_and", "aten::bitwise_right_shift",
                            "aten::bitwise_not", "aten::sub_"),
          "softmax": ("aten::_softmax", "aten::_softmax_backward_data"),
          "layer norm": ("aten::native_layer_norm", "aten::native_layer_norm_backward"),
          "AdamW (fused)": ("aten::_fused_adamw_",)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--precision", default="auto")
    args = parser.parse_args()
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    from cselab.config import load_config
    from cselab.hardware import choose_precision
    from cselab.train.optimizer import OptimizerStep, make_optimizer
    from cselab.train.rank import RankContext
    from cselab.train.setup import build_setup, make_loader
    from cselab.train.steps import StepForward, choose_step

    corpus = require_shared() / "corpus" / "wiki1m-first-11913.txt"
    total = args.steps + 2
    config = load_config("simcse", [f"data.corpus={corpus}", f"train.precision={args.precision}",
                                    f"train.output_dir={tempfile.mkdtemp()}", f"optim.max_steps={total}"])
    device = torch.device("cpu")
    parts = build_setup(config, device)
    precision = choose_precision(config.train.precision, device, parts.encoder.hidden_size)
    optimizer, scheduler = make_optimizer(parts.trainable, config.optim, total)
    update = OptimizerStep(optimizer, scheduler, list(parts.trainable.parameters()), config.optim.max_grad_norm)
    step = choose_step(StepForward(parts.encoder, parts.head, parts.objective, device, precision.precision), None)
    parts.trainable.train()
    process = RankContext(device, config.train.output_dir)
    batches = list(itertools.islice(iter(make_loader(parts, config.train, 0, process)), total))
    for batch in batches[:2]:  # warm-up: kernel selection, allocator
        step(batch)
        update()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches[2:]:
            step(batch)
            update()
    events = prof.key_averages()
    total_us = sum(e.self_cpu_time_total for e in events)
    shares = {group: sum(e.self_cpu_time_total for e in events if e.key in ops) / total_us
              for group, ops in GROUPS.items()}
    shares["everything else"] = 1 - sum(shares.values())
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    rows = [[group, f"{share:.1%}"] for group, share in shares.items()]
    notes = (f"{args.steps} profiled steps after 2 warm-up steps, precision {precision.precision} "
             f"({precision.reason}); self CPU time {total_us / 1e6:.2f} s. Top operators: "
             + ", ".join(f"{e.key} {e.self_cpu_time_total / total_us:.1%}" for e in top)
             + ". Command: python benchmarks/profile_step.py"
             + (f" --steps {args.steps}" if args.steps != 6 else "")
             + (f" --precision {args.precision}" if args.precision != "auto" else ""))
    write_results("step_profile", {"precision": precision.to_dict(), "steps": args.steps,
                                   "shares": shares, "self_cpu_seconds": total_us / 1e6,
                                   "top": {e.key: e.self_cpu_time_total / total_us for e in top}},
                  "Where a SimCSE training step spends its time (CPU)", ["operator group", "share of self CPU time"],
                  rows, notes)
    print("\n".join(f"{g}: {s:.1%}" for g, s in shares.items()))


if __name__ == "__main__":
    main()
