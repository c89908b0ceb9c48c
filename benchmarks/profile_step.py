"""Where a cselab SimCSE training step spends its time (torch.profiler), at the recipe's defaults; or,
with ``--launches``, how many kernels each path of the encoder launches per step.

    python benchmarks/profile_step.py [--steps 6] [--precision auto]
    python benchmarks/profile_step.py --launches [--device cpu|cuda] [--paths ...]

MiniLM-L6, batch 64, max_seq_len 32, the Wiki sample; 2 warm-up steps, then ``--steps`` profiled.
Self CPU time by operator group, written to benchmarks/results/step_profile.{json,md}.

``--launches``: one training step's forward and backward of the encoder (a SimCSE batch of 64 pairs
of the Wiki sample, under bf16 autocast as on a GPU, dropout on) per path: padded eager
(transformers' forward), unpadded eager, unpadded compiled (inductor). Counted with torch.profiler
after 2 warm-up steps: on a GPU the device kernels; on a CPU the kernels a GPU would launch, that is
the operators that do work at the bottom of the profiler's tree (views, allocations and metadata
left out) and inductor's generated kernels (``cpp.enable_kernel_profile``). Dtype conversions: the
``_to_copy`` operators, and the generated kernels that only convert. The count does not depend on
the width, so the model is MiniLM's 6 layers at width 64 (bf16 matmuls are slow on a CPU without
native bf16). Written to benchmarks/results/step_launches{_cuda}.{json,md}.
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


# Operators that launch no kernel: views, metadata, allocations.
NO_KERNEL = {"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::as_strided",
             "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::unsqueeze", "aten::squeeze",
             "aten::select", "aten::slice", "aten::split", "aten::split_with_sizes", "aten::unbind", "aten::alias",
             "aten::detach", "aten::detach_", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg",
             "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided",
             "aten::contiguous", "aten::numpy_T", "aten::expand_as", "aten::view_as", "aten::flatten",
             "aten::unflatten", "aten::movedim", "aten::narrow", "aten::chunk", "aten::result_type",
             "aten::is_nonzero", "aten::set_", "aten::_local_scalar_dense", "aten::item"}
LAUNCH_PATHS = {"padded-eager": ("false", False), "unpadded-eager": ("true", False),
                "unpadded-compiled": ("true", True)}
SMALL_MINILM = {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 2,
                "intermediate_size": 256, "max_position_embeddings": 512}


CONVERTING = {"", "to", "copy", "convert", "element", "type", "clone"}


def only_converts(kernel: str) -> bool:
    """An inductor kernel (``cpp_fused__to_copy_3``, ``triton_poi_fused__to_copy_0``) that only converts."""
    fused = kernel.split("_fused_", 1)[-1].rsplit("_", 1)[0]
    return "_fused_" in kernel and set(fused.split("_")) <= CONVERTING


def count_launches(prof, device: str) -> dict[str, int]:
    """Kernels launched, and dtype conversions among them, in a profiled step."""
    events = prof.events()
    if device == "cuda":
        kernels = [e for e in events if e.device_type.name == "CUDA"]
        conversions = [e for e in kernels if "direct_copy_kernel" in e.name or only_converts(e.name)]
        return {"kernels": len(kernels), "dtype_conversions": len(conversions),
                "generated_kernels": sum("triton_" in e.name for e in kernels)}
    generated = [e for e in events if "cpp_fused" in e.name]

    def works(event) -> bool:
        return event.name.startswith("aten::") and event.name not in NO_KERNEL

    leaves = [e for e in events if works(e) and not any(works(c) for c in e.cpu_children)]
    conversions = [e for e in events if e.name == "aten::_to_copy"] + [e for e in generated if only_converts(e.name)]
    return {"kernels": len(leaves) + len(generated), "dtype_conversions": len(conversions),
            "generated_kernels": len(generated)}


def encoder_step(encoder, features: dict, tokens: int) -> None:
    """The encoder's share of a training step: forward under bf16 autocast, backward."""
    import torch

    encoder.zero_grad(set_to_none=True)
    with torch.autocast(encoder.device.type, dtype=torch.bfloat16):
        vectors = encoder(features, real_tokens=tokens)
    vectors.float().pow(2).mean().backward()


def launches(args) -> None:
    import json

    import torch
    import torch._inductor.config as inductor
    from torch.profiler import ProfilerActivity, profile

    from cselab.config import ModelConfig, TrainConfig
    from cselab.model.encoder import SentenceEncoder
    from cselab.speed import speed_up

    corpus = require_shared() / "corpus" / "wiki1m-first-11913.txt"
    lines = [s.strip() for s in corpus.read_text(encoding="utf-8").splitlines() if s.strip()][:64]
    device = torch.device(args.device)
    inductor.cpp.enable_kernel_profile = True  # inductor's CPU kernels appear in the profile by name
    rows, found = [], {}
    for path in args.paths:
        unpad, compiled = LAUNCH_PATHS[path]
        torch.manual_seed(0)
        torch._dynamo.reset()
        encoder = SentenceEncoder.from_config(SMALL_MINILM, "minilm", pooler="cls", max_seq_len=32).to(device)
        speed_up(encoder, TrainConfig(compile="true" if compiled else "false", fast_cpu=False),
                 ModelConfig(unpad=unpad), device)
        encoder.train()
        features = {k: v.to(device) for k, v in encoder.tokenize(lines + lines).items()}  # SimCSE: each line twice
        tokens = int(features["attention_mask"].sum())
        for _ in range(2):
            encoder_step(encoder, features, tokens)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            encoder_step(encoder, features, tokens)
            if device.type == "cuda":
                torch.cuda.synchronize()
        found[path] = count_launches(prof, device.type)
        rows.append([path, found[path]["kernels"], found[path]["dtype_conversions"]])
        print(path, found[path], flush=True)
    name = "step_launches" + ("_cuda" if device.type == "cuda" else "")
    what = ("device kernels" if device.type == "cuda" else
            "kernels a GPU would launch: leaf operators that do work, and inductor's generated kernels")
    notes = (f"One training step (forward and backward of the encoder, bf16 autocast, dropout on) of 64 SimCSE "
             f"pairs of the Wiki sample, MiniLM's 6 layers at width 64, on {args.device}; counted: {what}. "
             "Command: python benchmarks/profile_step.py --launches"
             + (f" --device {args.device}" if args.device != "cpu" else "")
             + (f" --paths {','.join(args.paths)}" if args.paths != list(LAUNCH_PATHS) else ""))
    write_results(name, {"device": args.device, "counts": found, "model": json.loads(json.dumps(SMALL_MINILM))},
                  "Kernels launched per training step, by path", ["path", "kernels", "dtype conversions"], rows, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--launches", action="store_true", help="count kernels per step of each encoder path")
    parser.add_argument("--device", default="cpu", help="with --launches: cpu or cuda")
    parser.add_argument("--paths", default=",".join(LAUNCH_PATHS), help="with --launches: the paths counted")
    args = parser.parse_args()
    args.paths = args.paths.split(",")
    if args.launches:
        launches(args)
        return
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
