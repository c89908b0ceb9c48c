"""The ``cselab`` command: train, encode, recipes; eval, augment and data come from their packages."""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import traceback
from pathlib import Path

# Subcommands owned by other packages: each module has register(subparsers).
EXTENSIONS = ["cselab.evaluate.cli", "cselab.augment.cli", "cselab.experiments.cli"]


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a sentence encoder with a recipe",
                       description="Train a sentence encoder. With no arguments: unsupervised SimCSE on the "
                                   "offline defaults (all-MiniLM-L6-v2 base, WordNet usage examples as corpus).",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--recipe", default="simcse", help="shipped recipe name (see `cselab recipes`) or a YAML path")
    p.add_argument("--corpus", help="training text: .txt/.txt.gz (one sentence a line), .csv/.tsv/.jsonl "
                                    "(with --set data.column=NAME), hf:NAME[:SPLIT], or builtin:wordnet-glosses")
    p.add_argument("--output-dir", help="where the final model, metrics.jsonl, summary.json and checkpoints go")
    p.add_argument("--seed", type=int, help="random seed (data order, dropout, augmentations)")
    p.add_argument("--max-steps", type=int, help="stop after this many optimiser steps")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any recipe key, e.g. --set optim.lr=1e-5 (repeatable)")
    p.add_argument("--no-resume", action="store_true", help="ignore checkpoints in --output-dir and start over")
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    p.set_defaults(func=_run_train)


def _run_train(args) -> int:
    from cselab.config import load_config

    direct = {"data.corpus": args.corpus, "train.output_dir": args.output_dir, "train.seed": args.seed,
              "optim.max_steps": args.max_steps}
    config = load_config(args.recipe, args.overrides, **direct)
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    from cselab.train.loop import train

    summary = train(config, resume=not args.no_resume)
    print(format_summary(summary))
    return 0 if summary["finished"] else 3


def format_summary(summary: dict) -> str:
    lines = [f"recipe {summary['recipe']}: {summary['steps']}/{summary['total_steps']} steps"
             f"{'' if summary['finished'] else ' (stopped early; run again to resume)'}",
             f"  corpus          {summary['corpus']['kept']} sentences"
             + (f" (skipped {sum(summary['corpus']['skipped'].values())}: "
                + ", ".join(f"{k} {v}" for k, v in summary["corpus"]["skipped"].items()) + ")"
                if summary["corpus"]["skipped"] else "")
             + ("; cleaned: " + ", ".join(f"{k} {v}" for k, v in summary["corpus"]["cleaned"].items())
                if summary["corpus"].get("cleaned") else "")]
    if summary["first_loss"] is not None:
        lines.append(f"  loss            {summary['first_loss']:.4g} -> {summary['final_loss']:.4g}")
    if summary["best_stsb_dev"] is not None:
        base = summary.get("base_stsb_dev")
        before = f"{base:.2f} before training -> " if base is not None else ""
        lines.append(f"  STS-B dev       {before}{summary['best_stsb_dev']:.2f} (best, step {summary['best_step']}; "
                     f"{summary['precision']['precision']})")
    if summary.get("precision"):
        choice = summary["precision"]
        lines.append(f"  device          {summary['device']}, {choice['precision']} ({choice['reason']})")
    if summary["sentences_per_second"]:
        lines.append(f"  throughput      {summary['sentences_per_second']:.1f} sentences/s")
    lines.append(f"  wall time       {summary['wall_seconds']:.1f} s")
    if summary["finished"] or summary["best_stsb_dev"] is not None:
        lines.append(f"  model           {summary['output_dir']}")
    else:
        lines.append(f"  checkpoints     {summary['output_dir']}/checkpoints")
    return "\n".join(lines)


def _add_encode(sub) -> None:
    p = sub.add_parser("encode", help="embed sentences with a trained model",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("model", help="model directory or name (minilm = the offline base)")
    p.add_argument("--in", dest="input", required=True, help="text file, one sentence per line")
    p.add_argument("--out", required=True, help="output .npy file (float32, one row per input line)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="auto",
                   help="auto: bf16/fp16 on a GPU, on a CPU bf16 only where it is native and faster, else fp32")
    p.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N")
    p.set_defaults(func=_run_encode)


def _run_encode(args) -> int:
    import numpy as np

    import cselab

    path = Path(args.input)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: input file not found")
    sentences = path.read_text(encoding="utf-8", errors="replace").splitlines()
    from cselab.hardware import resolve_device

    device = resolve_device(args.device, "--device")
    model = cselab.load(args.model).to(device)
    vectors = model.encode(sentences, batch_size=args.batch_size, normalize=args.normalize,
                           precision=args.precision, show_progress=True)
    np.save(args.out, vectors)
    print(f"{len(sentences)} embeddings of size {vectors.shape[1]} -> {args.out}")
    return 0


def _add_recipes(sub) -> None:
    p = sub.add_parser("recipes", help="list the shipped recipes")
    p.set_defaults(func=_run_recipes)


def _run_recipes(args) -> int:
    from cselab.config import RECIPE_DIR, list_recipes

    for name in list_recipes():
        first = (RECIPE_DIR / f"{name}.yaml").read_text().splitlines()[0].lstrip("# ")
        print(f"{name:28s} {first}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cselab", description="Contrastive Sentence Embedding Lab")
    parser.add_argument("--version", action="version", version=f"cselab {__import__('cselab').__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train(sub)
    _add_encode(sub)
    _add_recipes(sub)
    for module_name in EXTENSIONS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that package has no commands yet
            raise
        module.register(sub)
    return parser


# Errors that explain themselves in one line: (module, class name), looked up only once the module
# is loaded, so `cselab recipes` does not import torch to learn an exception's name.
USER_ERRORS = [("cselab.errors", "ConfigError"), ("cselab.errors", "UnknownNameError"),
               ("cselab.errors", "UnsafeModelError"), ("cselab.errors", "ModelLoadError"),
               ("cselab.errors", "TrainingError"), ("cselab.data.corpus", "CorpusError"),
               ("cselab.train.checkpoint", "CheckpointError"),
               ("cselab.augment.base", "AugmenterUnavailable"), ("cselab.augment.cache", "CacheFileError"),
               ("cselab.augment.cli", "AugmentCliError"), ("cselab.evaluate.formats", "DataFormatError"),
               ("cselab.evaluate.download", "DownloadError"), ("cselab.experiments", "ExperimentError")]


def is_user_error(exc: BaseException) -> bool:
    if isinstance(exc, FileNotFoundError):
        return True
    classes = [getattr(sys.modules[m], name, None) for m, name in USER_ERRORS if m in sys.modules]
    return isinstance(exc, tuple(c for c in classes if c is not None))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except Exception as exc:
        if args.verbose:
            raise
        if not is_user_error(exc):
            # A bug, not bad input: the whole traceback, and where to send it.
            traceback.print_exc()
            print(f"cselab {args.command}: internal error ({type(exc).__name__}); please report it with the "
                  f"traceback above", file=sys.stderr)
            return 1
        print(f"cselab {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
