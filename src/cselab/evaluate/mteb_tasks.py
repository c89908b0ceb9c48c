"""MTEB (Muennighoff et al., 2023) through the ``mteb`` package: ``cselab eval MODEL --mteb [TASK,...]``.

Online, MTEB's own tasks are run as MTEB defines them (data from the Hugging Face Hub). Offline
(``HF_HUB_OFFLINE``, or no connection to the Hub), and for ``--split dev``, the STS tasks are served
from the local SentEval directory as MTEB custom tasks under their MTEB names (STS12-16,
STSBenchmark, SICK-R: MTEB's own task metadata, main score cosine Spearman, the pairs read by
cselab's readers), and each ``--sts-file`` likewise. The scores are MTEB's own computation; the
result files are MTEB's (``ResultCache``: ``DIR/results/MODEL/REVISION/TASK.json``).

The model goes to MTEB under its own name and a revision that is its weights' fingerprint, never
MTEB's anonymous default name, so one model's cached results are never read as another's.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import numpy as np

from cselab.errors import ConfigError
from cselab.sources import offline_reason

INSTALL = "pip install 'cselab[mteb]'"
# SentEval's STS tasks under their MTEB names; the local files are what cselab's tasks read.
DEFAULT_OFFLINE = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
DEV_OFFLINE = ("STSBenchmark", "SICK-R")  # --split dev: STS-B dev, SICK trial
MTEB_SPLIT = {"test": "test", "dev": "validation"}  # MTEB's name for a dev split


class MtebMissingError(ConfigError):
    """``--mteb`` asked for where the mteb package is not installed."""


def require_mteb():
    try:
        import mteb
    except ModuleNotFoundError as error:
        if error.name != "mteb":
            raise
        raise MtebMissingError(f"--mteb needs the mteb package: {INSTALL} (or pip install mteb)") from None
    return mteb


def mteb_model_name(name: str, path: str) -> str:
    """MTEB's ``org/name``: a Hub name as it is, a local directory as ``local/<folder>``, a short name
    (``minilm``) as ``local/<name>``."""
    if not Path(path).exists() and "/" in name:
        return name
    folder = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name if Path(name).exists() or "/" not in name else name)
    return f"local/{folder or 'model'}"


def mteb_model(loaded):
    """``loaded`` (a :class:`~cselab.evaluate.models.LoadedModel`) as an MTEB encoder with its own name
    and revision (its weights' fingerprint, or 'no_revision_available' for a Hub name)."""
    require_mteb()
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    # Defined here: mteb is an optional extra, imported only when --mteb is asked for.
    class CselabEncoder(AbsEncoder):
        """cselab's encoder in MTEB's encoder protocol; cosine is its similarity, as in cselab eval."""

        def __init__(self, model):
            self.model = model
            # The weights' fingerprint with pooler, length and precision (cselab's cache key): what changes scores.
            revision = hashlib.sha256(model.cache_key.encode()).hexdigest()[:16] if model.fingerprint else None
            self.mteb_model_meta = ModelMeta.create_empty(overwrites={
                "name": mteb_model_name(model.name, model.path), "revision": revision,
                "similarity_fn_name": ScoringFunction.COSINE, "framework": ["PyTorch"], "max_tokens": model.max_seq_len,
                "embed_dim": int(model.encoder.hidden_size), "modalities": ["text"]})

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
            return self.model.encode([text for batch in inputs for text in batch["text"]])

    return CselabEncoder(loaded)


def local_task(task):
    """A cselab STS task (SentEval's or a user's file) as an MTEB custom task: MTEB's metadata for its
    MTEB name (a user file's: STSBenchmark's, renamed), the pairs from cselab's readers, the split
    named as MTEB names it, and the files' digest as the dataset revision."""
    mteb = require_mteb()
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS

    from cselab.evaluate.embeddings import data_key
    from cselab.evaluate.tasks import StsFile

    own = isinstance(task, StsFile)
    data = task.data()
    pairs = list(data.values()) if isinstance(data, dict) else [data]  # STS12-16: every subset's pairs pooled
    left = [s for p in pairs for s in p.left]
    right = [s for p in pairs for s in p.right]
    gold = np.concatenate([p.gold for p in pairs])
    split = MTEB_SPLIT[task.split]
    base = mteb.get_task("STSBenchmark" if own else task.mteb_name).metadata
    name = f"cselab-sts-{task.path.stem}" if own else task.mteb_name
    update = {"name": name, "eval_splits": [split],
              "dataset": {"path": f"local/{name}", "revision": data_key(task.files())},
              "description": f"{base.description} Served offline by cselab from {task.data_dir}.",
              "superseded_by": None}  # the local copy is what it is; MTEB's note on its newer version is for its own
    if own:  # STSBenchmark's metadata is only the template: none of its provenance is the user's file's
        update.update(description=f"Scored sentence pairs from {task.path}, served by cselab.", reference=None,
                      bibtex_citation="", domains=None, date=None)
    metadata = base.model_copy(update=update)

    # Defined here: mteb is an optional extra, imported only when --mteb is asked for.
    class LocalSTS(AbsTaskSTS):
        min_score, max_score = float(gold.min()), float(gold.max())  # the range read from the data

        def load_data(self, **kwargs) -> None:
            self.dataset = DatasetDict({split: Dataset.from_dict(
                {"sentence1": left, "sentence2": right, "score": gold.tolist()})})
            self.data_loaded = True

    LocalSTS.metadata = metadata
    return LocalSTS()


def select_tasks(spec: str, split: str, offline: bool, data_dir: Path | None, sts_files: list[str]):
    """The MTEB tasks to run: online, MTEB's own by name (``default``: SentEval's STS under their MTEB
    names); offline, each named STS task served from ``data_dir``. Each ``--sts-file`` is added."""
    mteb = require_mteb()
    from cselab.evaluate import tasks as registry

    by_mteb_name = {registry.TASKS.get(n).mteb_name.lower(): n for n in registry.group_names("sts")}
    names = ([*(DEV_OFFLINE if split == "dev" else DEFAULT_OFFLINE)] if spec == "default"
             else [n.strip() for n in spec.split(",") if n.strip()])
    chosen = []
    for name in names:
        local = by_mteb_name.get(name.lower())
        if offline or split == "dev":
            if local is None:
                raise ConfigError(f"--mteb {name}: offline (or with --split dev) only SentEval's STS tasks are "
                                  f"served locally: {', '.join(DEFAULT_OFFLINE)}; MTEB's other tasks need the Hub")
            if data_dir is None:
                raise ConfigError(f"--mteb {name}: offline it is read from the SentEval directory: pass --data-dir "
                                  "or set CSELAB_DATA (`cselab data download`)")
            chosen.append(local_task(registry.build([local], data_dir, split)[0]))
        else:
            chosen.append(mteb.get_task(name))
    chosen += [local_task(task) for task in registry.build([f"sts:{f}" for f in sts_files], None, split)]
    return chosen


def evaluate_mteb(loaded, mteb_tasks: list, output: Path, batch_size: int = 128, progress: bool = True) -> dict:
    """Run ``mteb_tasks`` on ``loaded``; MTEB writes its result files under ``output``. Returns a
    cselab-style summary: each task's main score x100 (``score``) and MTEB's scores as MTEB gives them."""
    mteb = require_mteb()
    model = mteb_model(loaded)
    # "always": a local task's file may change under the same task name, so nothing is read back from the cache.
    run = mteb.evaluate(model, mteb_tasks, cache=mteb.ResultCache(output), overwrite_strategy="always",
                        encode_kwargs={"batch_size": batch_size}, show_progress_bar=progress)
    main_score = {task.metadata.name: task.metadata.main_score for task in mteb_tasks}
    results = {}
    for result in run.task_results:
        split, scores = next(iter(result.scores.items()))
        results[result.task_name] = {"score": scores[0]["main_score"] * 100, "main_score": main_score[result.task_name],
                                     "split": split, "scores": scores}
    meta = model.mteb_model_meta
    folder = Path(output) / "results" / meta.model_name_as_path() / str(meta.revision)
    return {**loaded.describe(), "mteb_model": meta.name, "mteb_revision": meta.revision, "mteb_results": str(folder),
            "mteb_version": mteb.__version__, "tasks": results}


def markdown(results: list[dict]) -> str:
    names = list(dict.fromkeys(n for r in results for n in r["tasks"]))
    lines = ["# cselab evaluation through MTEB", "", "Main score x100 of each task (STS: cosine Spearman).", "",
             "| Model (pooler) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for r in results:
        cells = [f"{r['tasks'][n]['score']:.2f}" if n in r["tasks"] else "-" for n in names]
        lines.append(f"| {r['model']} ({r.get('pooler')}) | " + " | ".join(cells) + " |")
    lines += ["", *(f"- {r['model']}: MTEB results in {r['mteb_results']}" for r in results), ""]
    return "\n".join(lines)


def run_mteb_command(args, device, data_dir: Path | None) -> int:
    """``cselab eval --mteb``: checks (package, tasks, files) before any model is loaded; ``data_dir``:
    the SentEval directory the command found (None: none)."""
    from cselab.evaluate import report
    from cselab.evaluate.models import load_model

    require_mteb()
    if args.classification_file:
        raise ConfigError("--mteb runs STS tasks; --classification-file is scored by cselab eval without --mteb")
    if args.update_card:  # the card records cselab eval's own tasks (SentEval names, model-index types)
        raise ConfigError("--update-card records cselab eval's results, not MTEB's; run it without --mteb")
    offline = offline_reason()
    mteb_tasks = select_tasks(args.mteb, args.split, offline is not None, data_dir, args.sts_file)
    if offline or args.split == "dev":
        print(f"MTEB {'offline (' + offline + ')' if offline else 'dev split'}: the STS tasks are served from "
              f"{data_dir} as MTEB custom tasks", file=sys.stderr)
    output = Path(args.mteb_output or (Path(args.json).parent / "mteb" if args.json else "mteb-results"))
    results = []
    for name in args.models:
        loaded = load_model(name, pooler=args.pooler, max_seq_len=args.max_seq_len, precision=args.precision,
                            batch_size=args.batch_size, device=device)
        loaded.show_progress = not args.quiet
        results.append(evaluate_mteb(loaded, mteb_tasks, output, args.batch_size, progress=not args.quiet))
        del loaded
    table = markdown(results)
    print(table)
    json_path = Path(args.json) if args.json else None
    markdown_path = Path(args.markdown) if args.markdown else (json_path.with_suffix(".md") if json_path else None)
    for path in report.write(results, json_path, markdown_path, table=table):
        print(f"wrote {path}")
    print(f"MTEB result files: {results[0]['mteb_results']}", file=sys.stderr)
    return 0
