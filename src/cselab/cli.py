"""The ``cselab`` command: train, encode, recipes, push; eval, augment and data come from their packages."""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import traceback
from pathlib import Path

from cselab.errors import CselabError, counted, single_line

# The exit status of a command Ctrl-C ended (128 + SIGINT, as a shell reports it). A first Ctrl-C in training
# is no interruption: the run saves a checkpoint and stops, exit 3.
INTERRUPTED = 130

# Subcommands owned by other packages: each module has register(subparsers).
EXTENSIONS = ["cselab.evaluate.cli", "cselab.augment_command", "cselab.experiments.cli"]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds "(default: X)" only where there is a default to show: not for None, False or an empty list
    (an option that is simply off or unset), nor where the help text already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _nothing_to_show(action.default) or "(default" in text:
            return text
        return super()._get_help_string(action)


def _nothing_to_show(default) -> bool:
    # Identity, not equality: a default of 0 is worth showing, though 0 == False.
    return default is None or default is False or default is argparse.SUPPRESS or (
        isinstance(default, (list, tuple)) and not default)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line like every other error (the usage is in --help).
    Subcommands' parsers are of this class too: argparse builds them with the parent's class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {single_line(message)} (see {self.prog} --help)\n")


def use_help_formatter(parser: argparse.ArgumentParser) -> None:
    """One help formatter for every command and subcommand, those the extensions register included."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                use_help_formatter(child)


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a sentence encoder with a recipe",
                       description="Train a sentence encoder. With no arguments: unsupervised SimCSE on the "
                                   "offline defaults (all-MiniLM-L6-v2 base, WordNet usage examples as corpus).",
                       formatter_class=HelpFormatter)
    _add_run_arguments(p, default_recipe="simcse")
    p.add_argument("--paper-setting", action="store_true",
                   help="the papers' full setting: bert-base-uncased, SimCSE's wiki1m corpus (all of it) and "
                        "SentEval's data, checked before any work (--set and --corpus still apply on top); "
                        "see docs/paper-setting.md")


def _add_pretrain(sub) -> None:
    p = sub.add_parser("pretrain", help="pre-train a raw encoder from random weights (MLM; --recipe clear-pretrain)",
                       description="Pre-train a raw encoder from random weights: `cselab train --recipe "
                                   "mlm-pretrain` (packed blocks, whole corpus, validation MLM loss). The output "
                                   "directory is a Hugging Face and sentence-transformers model; start any recipe "
                                   "from it with --set model.name_or_path=DIR. See docs/pretraining.md.",
                       formatter_class=HelpFormatter)
    _add_run_arguments(p, default_recipe="mlm-pretrain")


def _add_run_arguments(p: argparse.ArgumentParser, default_recipe: str) -> None:
    p.add_argument("--recipe", default=default_recipe, help="shipped recipe name (see `cselab recipes`) or a YAML path")
    p.add_argument("--corpus", help="training text: .txt/.txt.gz (one sentence a line), .csv/.tsv/.jsonl "
                                    "(with --set data.column=NAME), hf:NAME[:SPLIT], or builtin:wordnet-glosses "
                                    "(default: the recipe's data.corpus)")
    p.add_argument("--output-dir", help="where the final model, metrics.jsonl, summary.json and checkpoints go "
                                        "(default: the recipe's train.output_dir)")
    p.add_argument("--seed", type=int, help="random seed (data order, dropout, augmentations) "
                                            "(default: the recipe's train.seed)")
    p.add_argument("--max-steps", type=int, help="stop after this many optimiser steps (default: the recipe's "
                                                 "optim.max_steps, else optim.epochs passes over the corpus)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any recipe key, e.g. --set optim.lr=1e-5 (repeatable)")
    p.add_argument("--no-resume", action="store_true", help="ignore checkpoints in --output-dir and start over")
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    p.set_defaults(func=_run_train, on_interrupt=": stopped at once by a second Ctrl-C, without saving; run the "
                                                 "same command again to resume from the last checkpoint")


def _run_train(args) -> int:
    from cselab.config import load_config

    direct = {"data.corpus": args.corpus, "train.output_dir": args.output_dir, "train.seed": args.seed,
              "optim.max_steps": args.max_steps}
    paper_setting = getattr(args, "paper_setting", False)  # `cselab pretrain` has no such option
    # The setting is a layer under the user's --set: `--set model.name_or_path=roberta-base` still wins.
    overrides = paper_setting_overrides() + args.overrides if paper_setting else args.overrides
    config = load_config(args.recipe, overrides, **direct)
    if paper_setting:
        require_paper_setting(config, fetch_data=not args.print_config)
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    if not config.model.from_config:
        check_model_early(config.model.name_or_path)
    from cselab.data.corpus import check_hf_source

    check_hf_source(config.data.corpus)  # before torch is imported, as the model is checked
    from cselab.train.loop import train

    summary = train(config, resume=not args.no_resume)
    print(format_summary(summary, config.optim.max_steps, config.optim.epochs))
    return 0 if summary["finished"] else 3


PAPER_MODEL = "bert-base-uncased"  # the BERT-base rows every paper reports


def paper_setting_overrides() -> list[str]:
    """``--set`` items for the papers' setting; paths JSON-quoted, which YAML reads back verbatim."""
    from cselab.evaluate.download import default_wiki1m_path, senteval_dir

    return [f"model.name_or_path={PAPER_MODEL}", f"data.corpus={json.dumps(str(default_wiki1m_path()))}",
            "data.max_sentences=null", f"data.dev_dir={json.dumps(str(senteval_dir()))}"]


def require_paper_setting(config, fetch_data: bool = True) -> None:
    """Every piece of the resolved setting is present, or one ConfigError listing each missing piece with
    the command that gets it; checked before any work, so a failed start writes no file.

    With ``fetch_data``, the Hub not set offline (HF_HUB_OFFLINE) and the models loadable (the encoder, and
    a term's own such as DiffCSE's generator: ``LossTerm.models``), a corpus or
    SentEval data missing where `cselab data download [wiki1m]` puts them without --dest is first
    downloaded as that command does (a failed download or unpack leaves no file behind), and why a
    download failed is named in its piece's entry. The model itself is only checked: the first training
    run downloads it through transformers."""
    from cselab.errors import ConfigError
    from cselab.losses import model_problems
    from cselab.sources import hub_offline

    model = _missing_model(config.model.name_or_path)
    term_models = model_problems(config.objective, ask_hub=True)  # a term's own model (DiffCSE's generator)
    corpus, senteval = _missing_corpus(config.data.corpus), _missing_senteval(config.data.dev_dir)
    if fetch_data and not model and not term_models and (corpus or senteval) and not hub_offline():
        corpus, senteval = _fetch_missing_data(config, corpus, senteval)
    missing = [m for m in (model, *term_models, corpus, senteval) if m]
    if missing:
        raise ConfigError("--paper-setting: missing " + "; ".join(missing))


def _fetch_missing_data(config, corpus: str | None, senteval: str | None) -> tuple[str | None, str | None]:
    """Download the missing corpus and SentEval data into their default places under ~/.cache/cselab (a
    path given with --corpus, data.dev_dir or $CSELAB_DATA is left to the user), then check again; returns
    the pieces still missing, each naming why its download failed. An unreachable source stops both."""
    from cselab.evaluate import download

    def fetcher(url: str, target: Path) -> dict:  # a dead network fails in seconds, not minutes
        return download.fetch(url, target, timeout=15)

    folder = _senteval_folder(config.data.dev_dir)
    fetches = []
    if corpus and not _corpus_dest_flag(config.data.corpus):
        fetches.append(("corpus", lambda: download.download_file(download.default_wiki1m_path(),
                                                                 url=download.WIKI1M_URL, fetcher=fetcher)))
    if senteval and folder == download.cselab_home() / "senteval":  # never into a place the user chose
        fetches.append(("SentEval", lambda: download.download(folder, url=download.DEFAULT_URL, fetcher=fetcher)))
    failures = {}
    for piece, fetch in fetches:
        try:
            fetch()
        except download.UnreachableError as error:
            failures[piece] = str(error)
            break
        except (download.DownloadError, OSError) as error:
            failures[piece] = str(error)
    return (_missing_corpus(config.data.corpus, failures.get("corpus")) if corpus else None,
            _missing_senteval(config.data.dev_dir, failures.get("SentEval")) if senteval else None)


def _missing_model(name: str) -> str | None:
    """Loadable without downloading (a local directory, the Hugging Face cache), or the Hub serves it."""
    from cselab.sources import model_source_problem

    problem = model_source_problem(name, ask_hub=True)
    return f"model {name} ({problem})" if problem else None


def _corpus_dest_flag(corpus: str) -> str:
    """`` --dest PATH`` for `cselab data download wiki1m` to write ``corpus``; empty at its default place."""
    from cselab.evaluate.download import default_wiki1m_path

    return "" if Path(corpus).expanduser() == default_wiki1m_path() else f" --dest {corpus}"


def _senteval_dest_flag(folder: Path) -> str:
    """`` --dest DIR`` for `cselab data download` to fill ``folder``; empty where it puts the data anyway."""
    from cselab.evaluate.download import senteval_dir

    return "" if folder == senteval_dir() else f" --dest {folder}"


def _senteval_folder(dev_dir: str | None) -> Path:
    """Where --paper-setting looks for SentEval data (``evaluate.download.senteval_dir``: imported when needed)."""
    from cselab.evaluate.download import senteval_dir

    return senteval_dir(dev_dir)


def _missing_corpus(corpus: str, failure: str | None = None) -> str | None:
    if corpus.startswith(("hf:", "builtin:")) or Path(corpus).expanduser().is_file():
        return None
    failed = f"download failed: {failure}; " if failure else ""
    return f"corpus {corpus} ({failed}get it with `cselab data download wiki1m{_corpus_dest_flag(corpus)}`)"


def _missing_senteval(dev_dir: str | None, failure: str | None = None) -> str | None:
    from cselab.evaluate.download import required_files

    folder = _senteval_folder(dev_dir)
    absent = [f for f in required_files() if not (folder / f).is_file()]
    if not absent:
        return None
    failed = f"download failed: {failure}; " if failure else ""
    return (f"SentEval data in {folder} ({counted(len(absent), 'file')} absent, e.g. {absent[0]}; {failed}get it "
            f"with `cselab data download{_senteval_dest_flag(folder)}`)")


def steps_line(summary: dict, max_steps: int | None = None, epochs: int = 1) -> str:
    """``recipe R: done/planned steps``, saying why the plan is shorter than ``optim.max_steps`` asked."""
    line = f"recipe {summary['recipe']}: {summary['steps']}/{counted(summary['total_steps'], 'step')}"
    if max_steps is not None and summary["total_steps"] < max_steps:
        line += (f" (optim.max_steps asked for {max_steps}, but {counted(epochs, 'epoch')} of this corpus "
                 f"{'is' if epochs == 1 else 'are'} {counted(summary['total_steps'], 'step')}; "
                 f"raise optim.epochs for more)")
    if not summary["finished"]:
        line += " (stopped early; run again to resume)"
    return line


def _selection_lines(summary: dict) -> list[str]:
    """The dev metrics' lines: the one that picked the final model (with its score before training),
    then each further metric of train.select_on with its own best model."""
    from cselab.evaluate.dev import metric_key

    lines = []
    key = summary.get("selected_by")
    if key not in (None, "last_step", "val_mlm_loss") and summary.get(f"best_{key}") is not None:
        base = summary.get(f"base_{key}")
        before = f"{base:.2f} before training -> " if base is not None else ""
        lines.append(f"  {summary.get('selection_label', key):<15} {before}{summary[f'best_{key}']:.2f} (best, step "
                     f"{summary['best_step']}; {summary['precision']['precision']})")
        lines += _worse_than_base_lines(summary, key)
    for entry in summary.get("select_on", [])[1:]:
        key = metric_key(entry)
        if summary.get(f"best_{key}") is not None:
            tasks = " + ".join(summary.get(f"{key}_tasks") or [])
            lines.append(f"  {summary.get(f'{key}_label', key):<15} {summary[f'best_{key}']:.2f} (best, step "
                         f"{summary[f'best_{key}_step']}; {tasks}) in {summary[f'{key}_model']}")
    return lines


def _worse_than_base_lines(summary: dict, key: str) -> list[str]:
    """A warning where training made the model worse than its start, naming the start to use instead."""
    if not summary.get("worse_than_base"):
        return []
    base = summary.get("base_model")
    start = f"the base model, {base}," if base else "the starting (randomly initialised) model"
    return [f"  warning         the best model is worse than before training ({summary[f'best_{key}']:.2f} against "
            f"{summary[f'base_{key}']:.2f}): {start} scores higher; use it instead, or change the recipe (a lower "
            f"optim.lr, more data)"]


def format_summary(summary: dict, max_steps: int | None = None, epochs: int = 1) -> str:
    lines = [steps_line(summary, max_steps, epochs),
             f"  corpus          {counted(summary['corpus']['kept'], 'sentence')}"
             + (f" (skipped {sum(summary['corpus']['skipped'].values())}: "
                + ", ".join(f"{k} {v}" for k, v in summary["corpus"]["skipped"].items()) + ")"
                if summary["corpus"]["skipped"] else "")
             + ("; cleaned: " + ", ".join(f"{k} {v}" for k, v in summary["corpus"]["cleaned"].items())
                if summary["corpus"].get("cleaned") else "")]
    if summary["first_loss"] is not None:
        lines.append(f"  loss            {summary['first_loss']:.4g} -> {summary['final_loss']:.4g}")
    lines += geometry_lines(summary.get("geometry"))
    if summary.get("best_val_mlm_loss") is not None:
        lines.append(f"  validation MLM  loss {summary['best_val_mlm_loss']:.4g} (best, step {summary['best_step']}; "
                     f"held-out lines)")
    lines += _selection_lines(summary)
    if summary.get("precision"):
        choice = summary["precision"]
        lines.append(f"  device          {summary['device']}, {choice['precision']} ({choice['reason']})")
    if summary["sentences_per_second"]:
        lines.append(f"  throughput      {throughput(summary)}")
    lines.append(f"  wall time       {summary['wall_seconds']:.1f} s")
    if summary["finished"] or summary.get("best_step") is not None:
        lines.append(f"  model           {summary['output_dir']}")
    else:
        lines.append(f"  checkpoints     {summary['output_dir']}/checkpoints")
    return "\n".join(lines)


def throughput(summary: dict) -> str:
    """Items a second, named for what they are: sentences, or a packed run's blocks of tokens."""
    rate = summary["sentences_per_second"]
    if summary.get("throughput_unit") == "block":  # summaries written before the key: sentences
        return f"{rate:.1f} blocks/s (packed blocks of tokens, not sentences)"
    return f"{rate:.1f} sentences/s"


def geometry_lines(geometry: dict | None) -> list[str]:
    """Alignment and uniformity before -> after training, and what they mean (train/geometry.py)."""
    if not geometry:
        return []
    base, trained = geometry["base"], geometry["trained"]
    return [f"  alignment       {base['alignment']:.4g} -> {trained['alignment']:.4g}    uniformity  "
            f"{base['uniformity']:.4g} -> {trained['uniformity']:.4g}   (before -> after; {geometry['lines']} "
            f"{geometry['source']})",
            "                  lower is better for both: alignment, the distance between two dropout views of a line "
            "(what SimCSE pulls together); uniformity, how evenly the lines spread over the sphere (what its "
            "negatives push apart)"]


def check_model_early(name: str) -> None:
    """A model that is no model, or a name the Hub cannot serve now, fails before any work (reading the
    corpus, building the run) and, for `encode`, before torch and transformers are imported."""
    from cselab.sources import check_model_source

    check_model_source(name)  # minilm, the offline base, is installed with cselab


def _add_encode(sub) -> None:
    p = sub.add_parser("encode", help="embed sentences with a trained model",
                       formatter_class=HelpFormatter)
    p.add_argument("model", help="model directory or name (minilm = the offline base)")
    p.add_argument("--in", dest="input", required=True, help="text file, one sentence per line")
    p.add_argument("--out", required=True, help="output .npy file (float32, one row per input line)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    # fp32 by default, as cselab.load(MODEL).encode and SentenceTransformer(MODEL).encode: the same model gives
    # the same vectors whichever way it is called; half precision only when asked.
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="fp32",
                   help="fp32: the vectors cselab.load(MODEL).encode and sentence-transformers give; auto: bf16/fp16 "
                        "on a GPU, on a CPU bf16 only where it is native and faster (faster; the vectors differ in "
                        "about the third decimal)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N")
    p.set_defaults(func=_run_encode, on_interrupt="; nothing written")


def _run_encode(args) -> int:
    import cselab
    from cselab.errors import ConfigError

    check_model_early(args.model)  # before torch is imported: a name the Hub cannot serve fails at once
    sentences = _encode_inputs(Path(args.input))
    out = _encode_output(Path(args.out))
    if not sentences:  # a 0-row array would pass for a result downstream
        raise ConfigError(f"--in {args.input}: empty file, nothing to encode")
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size: must be >= 1, got {args.batch_size}")
    from cselab.hardware import resolve_device

    device = resolve_device(args.device, "--device")  # every check before the model is loaded
    model = cselab.load(args.model).to(device)
    vectors = model.encode(sentences, batch_size=args.batch_size, normalize=args.normalize,
                           precision=args.precision, show_progress=True)
    _save_array(out, vectors)
    print(f"{counted(len(sentences), 'embedding')} of size {vectors.shape[1]} -> {out}")
    return 0


def _encode_inputs(path: Path) -> list[str]:
    """One sentence per line, decoded as a corpus is (UTF-8, or UTF-16 with a BOM); empty lines kept."""
    from cselab.data.corpus import is_file, text_lines

    if not is_file(path):
        what = "is a directory, not a text file" if path.is_dir() else "input file not found"
        raise FileNotFoundError(f"{path}: {what}")
    return text_lines(path)


def _encode_output(out: Path) -> Path:
    """The .npy file to write (numpy adds the suffix), checked before any work is done."""
    from cselab.errors import ConfigError

    if out.is_dir():  # not silently DIR.npy beside it
        raise ConfigError(f"--out {out}: is a folder; give the .npy file to write, e.g. {out / 'embeddings.npy'}")
    out = out if out.suffix == ".npy" else out.with_name(out.name + ".npy")
    if out.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(out))
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out.parent}: folder not found (for --out)")
    return out


def _save_array(out: Path, array) -> None:
    """np.save, atomically: a failed write (a full disk) leaves no partial file under the name."""
    import numpy as np

    from cselab.file_writes import replace_atomically

    with replace_atomically(out, "wb") as handle:
        np.save(handle, array, allow_pickle=False)


def _add_push(sub) -> None:
    p = sub.add_parser("push", help="upload a saved model to the Hugging Face Hub",
                       description="Creates the repository (kept if it exists) and uploads the model directory "
                                   "(its checkpoints and best-METRIC/ models stay local), its card's usage naming "
                                   "the repository. The token comes from `hf auth login` or HF_TOKEN.")
    p.add_argument("model", help="a model directory cselab wrote (cselab train's output directory)")
    p.add_argument("repo_id", help="the Hub repository, OWNER/NAME")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.set_defaults(func=_run_push)


def _run_push(args) -> int:
    from cselab.model.hub import push

    print(f"pushed {args.model} to {push(args.model, args.repo_id, private=args.private)}")
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
    parser = Parser(prog="cselab", description="Contrastive Sentence Embedding Lab")
    parser.add_argument("--version", action="version", version=f"cselab {__import__('cselab').__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train(sub)
    _add_pretrain(sub)
    _add_encode(sub)
    _add_recipes(sub)
    _add_push(sub)
    for module_name in EXTENSIONS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that package has no commands yet
            raise
        module.register(sub)
    use_help_formatter(parser)
    return parser


def is_user_error(exc: BaseException) -> bool:
    """Bad input rather than a bug: one of cselab's own errors, or an OSError about a path the user gave
    (missing, unreadable, a directory, a full disk)."""
    return isinstance(exc, (CselabError, OSError))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    existing = set(logging.getLogger().handlers)  # a host's own (pytest's) are left as they are
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for handler in set(logging.getLogger().handlers) - existing:
        handler.addFilter(not_printed_already)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C where no handler stops cleanly: eval, encode, a second one in training
        if args.verbose:
            raise
        _end_bars()
        print(f"cselab {args.command}: interrupted (Ctrl-C){getattr(args, 'on_interrupt', '')}", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `cselab recipes | head`: the reader has all it wants
        _quiet_stdout()
        return 0
    except Exception as exc:
        if args.verbose:
            raise
        if not is_user_error(exc):
            # A bug, not bad input: the whole traceback, and where to send it.
            traceback.print_exc()
            print(f"cselab {args.command}: internal error ({type(exc).__name__}); please report it with the "
                  f"traceback above", file=sys.stderr)
            return 1
        print(f"cselab {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2


def _end_bars() -> None:
    """Close the progress bars an interrupted command left open: its last line starts on a line of its own."""
    tqdm_module = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm_module, "tqdm", None), "_instances", ()) or ()):
        bar.close()


def not_printed_already(record: logging.LogRecord) -> bool:
    """False for a record a library's own handler prints (huggingface_hub and datasets add one to their
    loggers, which also pass records on to ours): each line is printed once."""
    logger = logging.getLogger(record.name)
    while logger is not None and logger is not logging.getLogger():
        if logger.handlers:
            return False
        if not logger.propagate:
            break
        logger = logger.parent
    return True


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush meets no closed pipe either."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (tests capture it)
        pass


def one_line(exc: BaseException) -> str:
    """The message of a user error, kept on one line; an OSError as ``path: reason``."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        message = f"{exc.filename}: {exc.strerror}"
    else:
        message = str(exc)
    return single_line(message)


if __name__ == "__main__":
    sys.exit(main())
