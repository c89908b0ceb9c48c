"""``cselab eval`` and ``cselab data`` (registered into the main CLI by ``register``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="evaluate encoders on STS, transfer tasks, alignment/uniformity",
                       description="Evaluate one or more encoders the way the SimCSE line of papers does: "
                                   "Spearman x100 on STS12-16, STS-B and SICK-R, logistic-regression probes on "
                                   "SentEval's transfer tasks, alignment and uniformity. Several models are "
                                   "compared side by side in one table.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="cselab / sentence-transformers / Hugging Face model directory or name "
                        "(minilm = the offline base)")
    p.add_argument("--tasks",
                   help="sts, transfer, align, all, or comma-separated task names (e.g. STS12,STSB,SST2); default: "
                        "sts, or none when --sts-file / --classification-file is given")
    p.add_argument("--sts-file", action="append", default=[], metavar="PAIRS",
                   help="your own scored pairs (CSV/TSV/JSONL: sentence1, sentence2, score; any score range): "
                        "Spearman x100 of cosine; repeatable")
    p.add_argument("--classification-file", action="append", default=[], metavar="FILE",
                   help="your own labelled sentences (CSV/TSV/JSONL: text, label): logistic-regression probe with "
                        "nested cross-validation, as MR/CR; repeatable")
    p.add_argument("--mteb", nargs="?", const="default", metavar="TASK,...",
                   help="score through the mteb package instead (pip install 'cselab[mteb]'): MTEB's own tasks "
                        "online; offline (HF_HUB_OFFLINE=1) the STS tasks served from the SentEval directory, and "
                        "each --sts-file, under MTEB's names. Without TASK: STS12-16, STSBenchmark, SICK-R "
                        "(--split dev: STSBenchmark and SICK-R on their dev files)")
    p.add_argument("--mteb-output", metavar="DIR",
                   help="where MTEB writes its result files (default: mteb/ beside --json, else ./mteb-results)")
    p.add_argument("--split", choices=["test", "dev"], default="test",
                   help="test: the papers' protocol; dev: STS-B dev, SICK trial, SST-2 dev, MRPC train CV "
                        "(model selection)")
    p.add_argument("--data-dir", help="SentEval data directory (default: $CSELAB_DATA when set, else "
                                      "~/.cache/cselab/senteval; as training looks)")
    p.add_argument("--json", help="write the results as JSON here "
                                  "(one model: its dict with 'avg'; several: {'models': [...]})")
    p.add_argument("--markdown", help="write the Markdown tables here (default: the --json path with .md)")
    p.add_argument("--update-card", action="store_true",
                   help="record the results in each local model's card (README.md model-index; cselab_eval.json); "
                        "not with --mteb")
    p.add_argument("--pooler", default="auto",
                   help="pooler: auto (from the model's config), cls, cls_before_pooler, avg, avg_first_last, avg_top2")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="auto",
                   help="encoding precision; auto: half precision on a GPU, on a CPU bf16 only where it is native "
                        "and faster, else fp32 (the figures name the precision used)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per encoding batch")
    p.add_argument("--max-seq-len", type=int, help="truncate inputs to this many tokens (default: the model's limit, "
                                                    "as SimCSE's evaluation does not truncate)")
    p.add_argument("--transfer-mode", choices=["test", "fast"], default="test",
                   help="test: SentEval's 10-fold protocol and full C grid; fast: 5 folds, half the C grid, "
                        "SST-2's probe trained on 10,000 of its training phrases")
    p.add_argument("--transfer-protocol", choices=["sklearn", "senteval"], default="sklearn",
                   help="sklearn: scikit-learn's logistic regression (fast); senteval: SentEval's PyTorch "
                        "classifier as the papers report it (Adam, early stopping, L2 from 1e-5..1e-2, MRPC "
                        "features [|u-v|, u*v]; with --transfer-mode fast its prototyping config)")
    p.add_argument("--seed", type=int, default=1111, help="cross-validation seed (SentEval's default)")
    p.add_argument("--cache-dir",
                   help="embedding cache (default: $CSELAB_CACHE/embeddings or ~/.cache/cselab/embeddings)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached embeddings")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run_eval, on_interrupt="; the tasks encoded so far are cached (a local model's, without "
                                                "--no-cache): the same command goes on from them")


def _data_dir(explicit: str | None) -> Path:
    """The SentEval directory (``download.senteval_dir``: --data-dir, else $CSELAB_DATA, else the download
    folder, as training looks), which must exist; the task files in it are checked by the tasks."""
    from cselab.evaluate.download import senteval_dir, senteval_source
    from cselab.evaluate.formats import DOWNLOAD_HINT

    path = senteval_dir(explicit)
    if path.is_dir():
        return path
    if explicit:
        raise FileNotFoundError(f"{path}: data directory not found ({DOWNLOAD_HINT})")
    raise FileNotFoundError(f"{path}: no SentEval data directory ({senteval_source()}); run `cselab data download` "
                            "(or pass --data-dir / set CSELAB_DATA)")


def find_data_dir(explicit: str | None) -> Path | None:
    """The SentEval directory where one is given or found; None when none is (an explicit one must exist)."""
    try:
        return _data_dir(explicit)
    except FileNotFoundError:
        if explicit:
            raise
        return None


def refuse_foreign_cards(models: list[str]) -> None:
    """--update-card writes only the cards of directories cselab saved; any other model stops the command
    before any work, so nothing is written (an installed package's or a Hub model's card is its author's)."""
    from cselab.errors import ConfigError
    from cselab.model.card import card_refusal
    from cselab.sources import resolve_model_path

    for name in models:
        refused = card_refusal(name, resolve_model_path(name))
        if refused:
            raise ConfigError(f"--update-card: {refused}; run without --update-card for this model")


def eval_tasks(args) -> list[str]:
    """The task list of ``cselab eval``: --tasks (default sts, or none beside the user's own files) and
    each --sts-file / --classification-file as ``KIND:PATH``."""
    own = [f"sts:{path}" for path in args.sts_file] + [f"classification:{path}" for path in args.classification_file]
    return [args.tasks, *own] if args.tasks else own or ["sts"]


def _run_eval(args) -> int:
    from cselab.evaluate import report, tasks
    from cselab.evaluate.embeddings import default_cache_dir
    from cselab.evaluate.models import load_model
    from cselab.evaluate.runner import evaluate
    from cselab.evaluate.transfer import ProbeSettings
    from cselab.hardware import resolve_device

    device = resolve_device(args.device, "--device")
    if args.mteb is not None:
        from cselab.evaluate.mteb_tasks import require_mteb, run_mteb_command

        require_mteb()  # the missing package is said first, before any path is looked at
        return run_mteb_command(args, device, find_data_dir(args.data_dir))
    if args.update_card:
        refuse_foreign_cards(args.models)
    spec = eval_tasks(args)
    # Fail on bad task names or missing files before loading any model.
    names = tasks.resolve(spec, args.split)
    senteval = any(not tasks.is_file_task(n) for n in names)
    data_dir = _data_dir(args.data_dir) if senteval or args.data_dir else None
    tasks.build(names, data_dir, args.split, ProbeSettings(args.transfer_mode, args.seed, args.transfer_protocol))
    cache_dir = None if args.no_cache else Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    results = []
    for name in args.models:
        model = load_model(name, pooler=args.pooler, max_seq_len=args.max_seq_len, precision=args.precision,
                           batch_size=args.batch_size, device=device)
        if model.cache_key is None and cache_dir is not None:
            print(f"note: {name} is not a local directory, so its embeddings are not cached", file=sys.stderr)
        model.show_progress = not args.quiet
        results.append(evaluate(model, data_dir, spec, split=args.split, transfer_mode=args.transfer_mode,
                                cache_dir=cache_dir, seed=args.seed, progress=not args.quiet,
                                transfer_protocol=args.transfer_protocol))
        del model
    table = report.markdown(results)
    print(table)
    json_path = Path(args.json) if args.json else None
    markdown_path = Path(args.markdown) if args.markdown else (json_path.with_suffix(".md") if json_path else None)
    for path in report.write(results, json_path, markdown_path):
        print(f"wrote {path}")
    if args.update_card:
        from cselab.model.card import update_cards

        print("\n".join(update_cards(results)))
    return 0


def _add_data(sub) -> None:
    from cselab.evaluate.download import BASE_MODEL_COMMAND, DEFAULT_URL, WIKI1M_NAME, WIKI1M_URL

    p = sub.add_parser("data", help="download or check the SentEval evaluation data (and the wiki1m corpus)")
    actions = p.add_subparsers(dest="action", required=True)
    down = actions.add_parser("download", help="fetch SentEval's data in its directory layout, or the wiki1m corpus",
                              description="senteval (default): SentEval's evaluation data. wiki1m: SimCSE's "
                                          "training corpus (10^6 Wikipedia sentences), used by `cselab train "
                                          "--paper-setting`. The papers' base model is not fetched here: "
                                          f"`{BASE_MODEL_COMMAND}`, or the first online run caches it.",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    down.add_argument("target", nargs="?", choices=["senteval", "wiki1m"], default="senteval",
                      help="what to fetch")
    down.add_argument("--dest", help=f"where to put it (senteval: a directory in SentEval's layout, default "
                                     f"$CSELAB_DATA when set, else ~/.cache/cselab/senteval, where eval and "
                                     f"training look; wiki1m: a file, default $CSELAB_WIKI1M or "
                                     f"~/.cache/cselab/{WIKI1M_NAME})")
    down.add_argument("--url", help=f"what to fetch, http(s):// or file:// (senteval: a tar or zip, default "
                                    f"{DEFAULT_URL}; wiki1m: the text file, default {WIKI1M_URL})")
    down.add_argument("--sha256", help="expected sha256 of the download (checked when given)")
    down.add_argument("--force", action="store_true", help="download even if it is already there")
    down.set_defaults(func=_run_download)
    chk = actions.add_parser("check", help="list which tasks have their files in a data directory")
    chk.add_argument("--data-dir",
                     help="SentEval data directory (default: $CSELAB_DATA when set, else ~/.cache/cselab/senteval)")
    chk.set_defaults(func=_run_check)


def _run_download(args) -> int:
    if args.target == "wiki1m":
        return _download_wiki1m(args)
    from cselab.errors import counted
    from cselab.evaluate.download import DEFAULT_URL, download

    done = download(args.dest, url=args.url or DEFAULT_URL, sha256=args.sha256, force=args.force)
    if done["status"] == "downloaded":
        print(f"SentEval data ({counted(done['files'], 'file')} checked) -> {done['dest']}\n"
              f"archive: {counted(done['bytes'], 'byte')}, sha256 {done['sha256']}")
    else:
        print(f"{done['dest']}: {done['status']} ({counted(done['files'], 'file')}); use --force to download again")
    return 0


def _download_wiki1m(args) -> int:
    from cselab.errors import counted
    from cselab.evaluate.download import BASE_MODEL_COMMAND, WIKI1M_URL, default_wiki1m_path, download_file

    done = download_file(Path(args.dest) if args.dest else default_wiki1m_path(), url=args.url or WIKI1M_URL,
                         sha256=args.sha256, force=args.force)
    if done["status"] == "downloaded":
        print(f"wiki1m corpus -> {done['dest']}\n{counted(done['bytes'], 'byte')}, sha256 {done['sha256']}")
    else:
        print(f"{done['dest']}: {done['status']} ({counted(done['bytes'], 'byte')}); use --force to download again")
    # The third piece of the papers' setting is not a file cselab fetches.
    print(f"base model for --paper-setting: `{BASE_MODEL_COMMAND}` (or the first online run caches it)")
    return 0


def _run_check(args) -> int:
    from cselab.evaluate.download import check

    path = _data_dir(args.data_dir)  # where `cselab eval` would look
    for status, names in check(path).items():
        print(f"{status:14s} {', '.join(names)}")
    return 0


def register(subparsers) -> None:
    _add_eval(subparsers)
    _add_data(subparsers)
