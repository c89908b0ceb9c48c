"""Run evaluation tasks on one encoder and collect the results (one dict per model)."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cselab.evaluate import tasks as task_registry
from cselab.evaluate.embeddings import EmbeddingStore, Encoder, SentenceLookup
from cselab.evaluate.models import LoadedModel
from cselab.evaluate.transfer import ProbeSettings


def _mean(values: list[float]) -> float | None:
    # nan (an undefined correlation) propagates: an average over a failed task is not a number
    return float(np.mean([math.nan if v is None else v for v in values])) if values else None


def evaluate(model: LoadedModel | Encoder, data_dir: str | Path | None, tasks: str | list[str] = "sts",
             split: str = "test", transfer_mode: str = "test", cache_dir: Path | None = None, seed: int = 1111,
             progress: bool = True, on_task_done: Callable[[str, dict], None] | None = None,
             transfer_protocol: str = "sklearn") -> dict:
    """Scores of ``model`` on the named tasks/groups and ``KIND:PATH`` files (``sts:pairs.tsv``); ``avg`` is the
    mean of the SentEval STS tasks' headline numbers (a user's own files stay out of it).

    ``model`` is a :class:`LoadedModel` (cache keyed by its weights) or anything with
    ``encode(list[str]) -> ndarray`` (no disk cache: it cannot be fingerprinted). ``transfer_protocol``:
    ``sklearn`` (scikit-learn's logistic regression) or ``senteval`` (SentEval's PyTorch classifier).
    """
    # "~/.cache/cselab/senteval" from Python, as on the command line; None: only the user's own files
    data_dir = None if data_dir is None else Path(data_dir).expanduser()
    settings = ProbeSettings(mode=transfer_mode, seed=seed, protocol=transfer_protocol)
    names = task_registry.resolve(tasks, split)
    built = task_registry.build(names, data_dir, split, settings)
    if isinstance(model, LoadedModel):
        store = EmbeddingStore(model.encode, model.cache_key, cache_dir)
        description = model.describe()
    else:
        store = EmbeddingStore(lambda s: model.encode(s), None, None)
        description = {"model": type(model).__name__, "path": None, "pooler": getattr(model, "pooler", None)}
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    iterator = built
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(built, desc=f"eval {description['model']}", unit="task")
    for task in iterator:
        if progress:
            iterator.set_postfix_str(task.title)
        start = time.perf_counter()
        sentences = task.sentences()
        vectors = store.embed(task.cache_name, task.files(), sentences)
        results[task.name] = task.score(SentenceLookup(sentences, vectors))
        seconds[task.name] = round(time.perf_counter() - start, 3)
        if on_task_done is not None:
            on_task_done(task.name, results[task.name])
    return {**description, "data_dir": str(data_dir.resolve()) if data_dir else None, "split": split,
            "transfer_mode": transfer_mode, "transfer_protocol": transfer_protocol, "seed": seed, "tasks": results,
            **averages(results, names),
            "embedding_stats": dict(store.stats), "cache_dir": str(store.folder) if store.folder else None,
            "seconds": seconds, "cselab_version": __import__("cselab").__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def averages(results: dict[str, dict], names: list[str]) -> dict:
    """The papers' averages: over the STS tasks (``avg``) and over the transfer tasks (``transfer_avg``)."""
    groups = {n: task_registry.task_class(n).group for n in names}
    sts = [n for n in names if groups[n] == "sts"]
    transfer = [n for n in names if groups[n] == "transfer"]
    return {"avg": _mean([results[n]["score"] for n in sts]), "avg_over": sts,
            "transfer_avg": _mean([results[n]["score"] for n in transfer]), "transfer_avg_over": transfer}


def merge(earlier: dict, added: dict) -> dict:
    """``earlier``'s results extended by ``added``'s (the same model, split and probe; other tasks).

    The earlier tasks come first; the averages are recomputed over all of them; timings and
    embedding counts add up, and ``merged_from`` gives both dates.
    """
    results = {**earlier["tasks"], **added["tasks"]}
    stats_before, stats_now = earlier.get("embedding_stats", {}), added.get("embedding_stats", {})
    return {**added, "tasks": results, **averages(results, list(results)),
            "embedding_stats": {k: stats_before.get(k, 0) + stats_now.get(k, 0) for k in {**stats_before, **stats_now}},
            "seconds": {**earlier.get("seconds", {}), **added.get("seconds", {})},
            "merged_from": [earlier.get("date"), added.get("date")]}
