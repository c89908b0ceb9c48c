"""Disk taken by a training run's checkpoints and final model, against the layout before they were compacted.

    python benchmarks/checkpoint_size.py [--max-steps N]

Runs the main job (`cselab train`, offline defaults; STS-B dev from ../shared when present, so the
best model is selected as users see it) twice: as a user gets it (a finished run's last checkpoint
without AdamW's moments, train.keep_optimizer_state: false) and with the moments kept
(train.keep_optimizer_state: true), and measures each output directory with each file counted once
(hard links share their blocks). For comparison it writes, for real, what the kept run's checkpoints
took in the earlier layout (a full copy of the weights in every checkpoint, AdamW's moments dense,
two checkpoints kept) and measures those files too.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import SHARED, write_results
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from cselab.train import checkpoint as ckpt  # noqa: E402


def disk_bytes(paths: list[Path]) -> int:
    """Bytes of the regular files under ``paths``, each inode counted once (as `du` does)."""
    seen, total = set(), 0
    for root in paths:
        for path in [root] if root.is_file() else root.rglob("*"):
            info = path.stat()
            if path.is_file() and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def earlier_layout_bytes(checkpoint: Path, scratch: Path) -> int:
    """One checkpoint as the earlier layout wrote it: weights copied, optimizer moments dense."""
    dense = ckpt.read_checkpoint(checkpoint).states["optimizer"]["optimizer"]
    tensors = {f"{pid}.{key}": value for pid, values in dense["state"].items()
               for key, value in values.items() if hasattr(value, "shape")}
    save_file(tensors, str(scratch / "optimizer-dense.safetensors"))
    # Weights: the encoder's file and the other trained weights' (none when the run trains no head).
    weights = sum(f.stat().st_size for f in checkpoint.glob("*.safetensors") if f.name != "optimizer.safetensors")
    rest = sum(f.stat().st_size for f in checkpoint.iterdir() if f.suffix != ".safetensors")
    return weights + (scratch / "optimizer-dense.safetensors").stat().st_size + rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=None, help="default: the whole main job")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if (SHARED / "senteval-dev").is_dir():
            env["CSELAB_DATA"] = str(SHARED / "senteval-dev")
        runs = {}
        for name, keep in (("default", "false"), ("kept", "true")):
            out = Path(tmp) / name
            command = [sys.executable, "-m", "cselab.cli", "train", "--output-dir", str(out),
                       "--set", f"train.keep_optimizer_state={keep}"]
            if args.max_steps:
                command += ["--max-steps", str(args.max_steps)]
            subprocess.run(command, check=True, env=env)
            runs[name] = out
        default_total = disk_bytes([runs["default"]])
        default_checkpoints = disk_bytes([runs["default"] / "checkpoints"])
        out = runs["kept"]
        checkpoints = ckpt.list_checkpoints(out / "checkpoints")
        newest = checkpoints[-1]
        linked = (newest / "encoder.safetensors").stat().st_nlink > 1
        now_checkpoints = disk_bytes([out / "checkpoints"])
        now_total = disk_bytes([out])
        # What checkpoints/ alone adds beyond the final model (shared blocks counted with the model).
        now_extra = now_total - disk_bytes([p for p in out.iterdir() if p.name != "checkpoints"])
        earlier_one = earlier_layout_bytes(newest, Path(tmp))
        earlier_checkpoints = 2 * earlier_one  # two kept, each with its own copy of everything
        earlier_total = earlier_checkpoints + disk_bytes([p for p in out.iterdir() if p.name != "checkpoints"])
        opt_now = (newest / "optimizer.safetensors").stat().st_size
    mb = 1e6
    rows = [
        ["checkpoints kept", "1", f"{len(checkpoints)} (train.keep_checkpoints=1)", "2"],
        ["newest checkpoint's encoder weights", "hard link to the final model" if linked else "own copy",
         "hard link to the final model" if linked else "own copy", "own copy"],
        ["newest checkpoint, optimizer.safetensors (MB)", "none", round(opt_now / mb, 1), "dense (in the rows below)"],
        ["checkpoints/ counted alone (MB)", round(default_checkpoints / mb, 1), round(now_checkpoints / mb, 1),
         round(earlier_checkpoints / mb, 1)],
        ["checkpoints/ beyond the final model (MB)", "-", round(now_extra / mb, 1), round(earlier_checkpoints / mb, 1)],
        ["whole output directory (MB)", round(default_total / mb, 1), round(now_total / mb, 1),
         round(earlier_total / mb, 1)],
    ]
    data = {"max_steps": args.max_steps, "checkpoints": len(checkpoints), "encoder_linked": linked,
            "optimizer_bytes_newest": opt_now, "checkpoints_bytes": now_checkpoints,
            "checkpoints_extra_bytes": now_extra,
            "output_dir_bytes": now_total, "default_output_dir_bytes": default_total,
            "default_checkpoints_bytes": default_checkpoints, "earlier_layout_checkpoint_bytes": earlier_one,
            "earlier_layout_output_dir_bytes": earlier_total, "ratio_output_dir": round(earlier_total / now_total, 2)}
    flags = f" --max-steps {args.max_steps}" if args.max_steps else ""
    notes = (f"Command: `python benchmarks/checkpoint_size.py{flags}`"
             f" (the main job, `cselab train` on offline defaults). The earlier layout's sizes are measured on files "
             f"written for real from the same checkpoint (weights copied, AdamW moments dense) times two checkpoints. "
             f"Output directory: {earlier_total / now_total:.2f}x smaller than before with the optimiser's state "
             f"kept; {now_total / default_total:.2f}x smaller again by default, where a finished run's last checkpoint "
             f"leaves it out.")
    print(write_results("checkpoint_size", data, "Checkpoint and output-directory size, main job",
                        ["what", "now (default)", "train.keep_optimizer_state: true", "earlier layout"], rows,
                        notes))


if __name__ == "__main__":
    main()
