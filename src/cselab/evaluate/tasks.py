"""The evaluation tasks, found by name: which files each reads and how it is scored.

A task is one class that carries its own metadata: ``group`` (sts, transfer, align, own), ``display``
(its table heading), ``dev_label`` (its heading on ``--split dev``; None: it has no dev split) and
``aliases``. The groups, the name lookup and every table derive from the registered classes, so a new
task is one class registered with ``@task(...)``.

A task lists the files it needs (so a missing file is reported before any encoding), the unique
sentences it needs embedded, and turns their embeddings into scores. ``--split test`` is the papers'
protocol; ``--split dev`` uses only the training/dev files (STS-B dev, SICK trial, SST-2 dev,
MRPC train CV) for model selection. A user's own file is a task named ``KIND:PATH``
(``sts:pairs.tsv``, ``classification:labelled.csv``), found in ``FILE_TASKS`` by its kind.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from cselab.errors import UnknownNameError
from cselab.evaluate import formats
from cselab.evaluate.alignment import alignment, uniformity
from cselab.evaluate.sts import cosine_rows, pooled_scores, spearman100
from cselab.evaluate.transfer import ProbeSettings, inner_kfold, kfold_then_test, pair_features
from cselab.evaluate.transfer import split as split_probe
from cselab.registry import Registry

SPLITS = ("test", "dev")
Lookup = Callable[[list[str]], np.ndarray]  # sentences -> their embeddings (rows in the same order)


class Task(Protocol):
    name: str
    display: str
    group: str

    def files(self) -> list[Path]: ...

    def sentences(self) -> list[str]: ...

    def score(self, lookup: Lookup) -> dict: ...


TASKS: Registry[Callable[..., Task]] = Registry("evaluation task", ordered=True)  # in the papers' column order
FILE_TASKS: Registry[Callable[..., Task]] = Registry("evaluation file kind")  # KIND:PATH, a user's own data
GROUPS = ("sts", "transfer", "align")  # what --tasks may name besides task names (and "all"); in table order


def task(name: str, description: str):
    """Register a task class under ``name`` (its registry name and result key) in table order."""
    def decorator(cls):
        cls.name = name
        TASKS.register(name, description)(cls)
        return cls
    return decorator


STS_YEARS = {
    "STS12": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13": ["FNWN", "headlines", "OnWN"],
    "STS14": ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"],
    "STS15": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
STSB_FILES = {"train": "STS/STSBenchmark/sts-train.csv", "dev": "STS/STSBenchmark/sts-dev.csv",
              "test": "STS/STSBenchmark/sts-test.csv"}
SICK_FILES = {"train": "SICK/SICK_train.txt", "dev": "SICK/SICK_trial.txt", "test": "SICK/SICK_test_annotated.txt"}
BINARY_FILES = {"MR": ("MR/rt-polarity.pos", "MR/rt-polarity.neg"),
                "CR": ("CR/custrev.pos", "CR/custrev.neg"),
                "SUBJ": ("SUBJ/subj.subjective", "SUBJ/subj.objective"),
                "MPQA": ("MPQA/mpqa.pos", "MPQA/mpqa.neg")}
SST_FILES = {s: f"SST/binary/sentiment-{s}" for s in ("train", "dev", "test")}
TREC_FILES = {"train": "TREC/train_5500.label", "test": "TREC/TREC_10.label"}
MRPC_FILES = {"train": "MRPC/msr_paraphrase_train.txt", "test": "MRPC/msr_paraphrase_test.txt"}


def _unique(*lists: list[str]) -> list[str]:
    return sorted(set().union(*lists))


class TaskBase:
    """The base of an evaluation task class (a plug-in's too): its metadata as class attributes, its data
    read once (``data()``), its files found in the data directory (``files()``)."""

    name = ""
    group = ""
    display = ""  # the table heading; empty: the name
    dev_label: str | None = None  # the table heading on the dev split; None: the task has no dev split
    aliases: tuple[str, ...] = ()  # further names --tasks accepts (compared without case, '-' and '_')
    mteb_name: str | None = None  # the same task's name in MTEB (cselab eval --mteb serves it offline)

    def __init__(self, data_dir: Path | None, split: str = "test", settings: ProbeSettings | None = None):
        if split not in SPLITS:
            raise UnknownNameError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        if split == "dev" and self.dev_label is None:
            raise UnknownNameError(f"{self.name} has no dev split (dev evaluates: {', '.join(dev_names())})")
        self.data_dir = None if data_dir is None else Path(data_dir)
        self.split = split
        self.settings = settings or ProbeSettings()
        self._loaded = None

    @classmethod
    def label(cls, split: str) -> str:
        """The task's heading in a table of ``split``'s results."""
        return (cls.dev_label if split == "dev" else None) or cls.display or cls.name

    @property
    def title(self) -> str:
        """The task's short name in messages and progress bars: its heading, else its name (MRPC has no
        heading of its own)."""
        return self.display or self.name

    @property
    def cache_name(self) -> str:
        """The embedding cache's name for this task's sentences (it changes when the task uses a subset)."""
        return self.name

    def relative_files(self) -> list[str]:
        raise NotImplementedError

    def files(self) -> list[Path]:
        return [self.data_dir / f for f in self.relative_files()]

    def missing_files(self) -> list[Path]:
        return [f for f in self.files() if not f.is_file()]

    def data(self):
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded

    def load(self):
        raise NotImplementedError


class STSYear(TaskBase):
    """One SemEval STS year: all subsets read, scored per subset and pooled ("all")."""

    group = "sts"

    def relative_files(self) -> list[str]:
        folder = f"STS/{self.name}-en-test"
        return [f"{folder}/STS.{kind}.{subset}.txt" for subset in STS_YEARS[self.name] for kind in ("input", "gs")]

    def load(self) -> dict[str, formats.SentencePairs]:
        folder = self.data_dir / f"STS/{self.name}-en-test"
        return {s: formats.read_sts_subset(folder / f"STS.input.{s}.txt", folder / f"STS.gs.{s}.txt")
                for s in STS_YEARS[self.name]}

    def sentences(self) -> list[str]:
        return _unique(*(p.left + p.right for p in self.data().values()))

    def score(self, lookup: Lookup) -> dict:
        subsets = {name: (cosine_rows(lookup(p.left), lookup(p.right)), p.gold) for name, p in self.data().items()}
        result = pooled_scores(subsets)
        return {"score": result["all"], **result}


class _ScoredPairs:
    """Scored pairs without training, read from one file by ``reader``: Spearman x100 of cosine similarity
    vs gold. A subclass says which file (``files``), how it is named in the result (``result_file``) and
    what else the result records (``extra``)."""

    reader = staticmethod(formats.read_stsb)

    def load(self) -> formats.SentencePairs:
        return self.reader(self.files()[0])

    def sentences(self) -> list[str]:
        return _unique(self.data().left, self.data().right)

    def result_file(self) -> str:
        raise NotImplementedError

    def extra(self, pairs: formats.SentencePairs) -> dict:
        return {}

    def score(self, lookup: Lookup) -> dict:
        pairs = self.data()
        value = spearman100(cosine_rows(lookup(pairs.left), lookup(pairs.right)), pairs.gold)
        return {"score": value, "spearman": value, "n": len(pairs), "file": self.result_file(), **self.extra(pairs)}


class STSPairs(_ScoredPairs, TaskBase):
    """SentEval's scored pairs (STS-B, SICK-R): one split's file of the data directory."""

    group = "sts"
    FILES: dict[str, str] = {}

    def relative_files(self) -> list[str]:
        return [self.FILES[self.split]]

    def result_file(self) -> str:
        return self.relative_files()[0]


for _year in STS_YEARS:
    task(_year, f"SemEval {_year} (Spearman, subsets pooled)")(type(_year, (STSYear,), {"mteb_name": _year}))


@task("STSBenchmark", "STS Benchmark, test split (dev: sts-dev.csv)")
class STSBenchmark(STSPairs):
    display, dev_label, aliases, mteb_name = "STS-B", "STS-B (dev)", ("stsb",), "STSBenchmark"
    FILES = STSB_FILES
    reader = staticmethod(formats.read_stsb)


@task("SICKRelatedness", "SICK relatedness, test split (dev: SICK_trial.txt)")
class SICKRelatedness(STSPairs):
    display, dev_label, aliases, mteb_name = "SICK-R", "SICK-R (trial)", ("sickr", "sick"), "SICK-R"
    FILES = SICK_FILES
    reader = staticmethod(formats.read_sick)


def _score_key(split: str) -> str:
    return "acc" if split == "test" else "devacc"


class BinaryCV(TaskBase):
    """MR, CR, SUBJ, MPQA: nested 10-fold cross-validation over all sentences."""

    group = "transfer"

    def relative_files(self) -> list[str]:
        return list(BINARY_FILES[self.name])

    def load(self) -> formats.LabelledSentences:
        positive, negative = self.files()
        return formats.read_binary(positive, negative)

    def sentences(self) -> list[str]:
        return _unique(self.data().sentences)

    def score(self, lookup: Lookup) -> dict:
        data = self.data()
        result = inner_kfold(lookup(data.sentences), data.labels, self.settings)
        return {"score": result["acc"], **result}


for _name in BINARY_FILES:
    task(_name, f"{_name} sentiment/subjectivity, nested 10-fold CV")(type(_name, (BinaryCV,), {}))


@task("SST2", "SST-2 binary sentiment: train, C on dev, test (dev split: dev accuracy)")
class SST2(TaskBase):
    group, display, dev_label, aliases = "transfer", "SST-2", "SST-2 (dev)", ("sst",)

    def relative_files(self) -> list[str]:
        return [SST_FILES["train"], SST_FILES["dev"]] + ([SST_FILES["test"]] if self.split == "test" else [])

    def load(self) -> list[formats.LabelledSentences]:
        train, *rest = [formats.read_sst(f) for f in self.files()]
        self.train_file_rows = len(train.labels)
        kept = self.settings.sample_train(train.labels)  # fast mode: a stratified sample of the training file
        if kept is not None:
            train = formats.LabelledSentences([train.sentences[i] for i in kept], train.labels[kept])
        return [train, *rest]

    @property
    def cache_name(self) -> str:
        train = self.data()[0]
        cut = len(train.labels) < self.train_file_rows
        return f"{self.name}-train{len(train.labels)}-seed{self.settings.seed}" if cut else self.name

    def sentences(self) -> list[str]:
        return _unique(*(part.sentences for part in self.data()))

    def score(self, lookup: Lookup) -> dict:
        parts = self.data()
        train, dev = parts[0], parts[1]
        test = parts[2] if len(parts) > 2 else None
        result = split_probe(lookup(train.sentences), train.labels, lookup(dev.sentences), dev.labels,
                             lookup(test.sentences) if test else None, test.labels if test else None, self.settings)
        return {"score": result[_score_key(self.split)], **result, "train_file_rows": self.train_file_rows}


@task("TREC", "TREC question type (6 classes): C by CV on train, test on TREC_10")
class TREC(TaskBase):
    group = "transfer"

    def relative_files(self) -> list[str]:
        return [TREC_FILES["train"], TREC_FILES["test"]]

    def load(self) -> list[formats.LabelledSentences]:
        return [formats.read_trec(f) for f in self.files()]

    def sentences(self) -> list[str]:
        return _unique(*(part.sentences for part in self.data()))

    def score(self, lookup: Lookup) -> dict:
        train, test = self.data()
        result = kfold_then_test(lookup(train.sentences), train.labels, lookup(test.sentences), test.labels,
                                 self.settings)
        return {"score": result["acc"], **result}


@task("MRPC", "MRPC paraphrase, features [u, v, |u-v|, u*v] (senteval protocol: [|u-v|, u*v]): "
              "C by CV on train, test (dev split: CV accuracy)")
class MRPC(TaskBase):
    group, dev_label = "transfer", "MRPC (train CV)"

    def relative_files(self) -> list[str]:
        return [MRPC_FILES["train"]] + ([MRPC_FILES["test"]] if self.split == "test" else [])

    def load(self) -> list[formats.LabelledPairs]:
        return [formats.read_mrpc(f) for f in self.files()]

    def sentences(self) -> list[str]:
        return _unique(*(part.left + part.right for part in self.data()))

    def features(self, pairs: formats.LabelledPairs, lookup: Lookup) -> np.ndarray:
        return pair_features(lookup(pairs.left), lookup(pairs.right), self.settings.protocol)

    def score(self, lookup: Lookup) -> dict:
        parts = self.data()
        train = parts[0]
        test = parts[1] if len(parts) > 1 else None
        result = kfold_then_test(self.features(train, lookup), train.labels,
                                 self.features(test, lookup) if test else None, test.labels if test else None,
                                 self.settings)
        return {"score": result[_score_key(self.split)], **result}


@task("align", "alignment (STS-B pairs with gold > 4) and uniformity (all STS-B sentences)")
class AlignUniform(TaskBase):
    group, display, dev_label = "align", "Align/Uniform", "Align/Uniform"
    aliases = ("alignment", "uniformity", "alignuniform")

    def relative_files(self) -> list[str]:
        return [STSB_FILES[self.split]]

    def load(self) -> formats.SentencePairs:
        return formats.read_stsb(self.files()[0])

    def sentences(self) -> list[str]:
        return _unique(self.data().left, self.data().right)

    def score(self, lookup: Lookup) -> dict:
        pairs = self.data()
        positive = pairs.gold > 4
        everything = self.sentences()
        return {"alignment": alignment(lookup([s for s, p in zip(pairs.left, positive, strict=True) if p]),
                                       lookup([s for s, p in zip(pairs.right, positive, strict=True) if p])),
                "uniformity": uniformity(lookup(everything)),
                "n_pairs": int(positive.sum()), "n_sentences": len(everything), "file": self.relative_files()[0],
                "alpha": 2, "t": 2}


class _FileTask(TaskBase):
    """A user's own file (``KIND:PATH``): read as given, whatever the split (it is the user's data)."""

    group = "own"
    dev_label = ""  # not None: a user's file is read whatever the split (it has no test/dev parts)
    kind = ""
    metric = ""  # what ``score`` is, for the table

    def __init__(self, path: str | Path, split: str = "test", settings: ProbeSettings | None = None):
        super().__init__(None, split, settings)
        self.path = Path(path).expanduser()
        self.name = f"{self.kind}:{path}"
        self.display = self.path.name

    def files(self) -> list[Path]:
        return [self.path]

    @property
    def cache_name(self) -> str:
        # The cache's data key covers the file's bytes; the stem keeps its file name readable.
        return f"{self.kind}-{self.path.stem}"


@FILE_TASKS.register("sts", "your own scored pairs (CSV/TSV/JSONL: sentence1, sentence2, score): Spearman x100")
class StsFile(_ScoredPairs, _FileTask):
    kind, metric = "sts", "Spearman x100"
    reader = staticmethod(formats.read_pairs_file)

    def result_file(self) -> str:
        return str(self.path)

    def extra(self, pairs: formats.SentencePairs) -> dict:
        return {"score_range": [float(pairs.gold.min()), float(pairs.gold.max())]}


@FILE_TASKS.register("classification", "your own labelled sentences (CSV/TSV/JSONL: text, label): "
                                       "logistic-regression probe, nested cross-validation as MR/CR")
class ClassificationFile(_FileTask):
    kind, metric = "classification", "accuracy x100 (nested CV)"

    def load(self) -> tuple[formats.LabelledSentences, list[str]]:
        data, names = formats.read_labelled_file(self.path)
        # The outer and the inner cross-validation each split a class across the folds.
        least, needed = int(np.bincount(data.labels).min()), 2 * self.settings.folds
        if least < needed:
            raise formats.DataFormatError(
                f"{self.path}: label {names[int(np.bincount(data.labels).argmin())]!r} has "
                f"{formats.counted(least, 'example')}; {self.settings.folds}-fold nested cross-validation needs "
                f"at least {needed} of each label")
        return data, names

    def sentences(self) -> list[str]:
        return _unique(self.data()[0].sentences)

    def score(self, lookup: Lookup) -> dict:
        data, names = self.data()
        result = inner_kfold(lookup(data.sentences), data.labels, self.settings)
        return {"score": result["acc"], **result, "labels": names, "file": str(self.path)}


def task_class(name: str):
    """The class of a task name (``KIND:PATH`` for a user's file)."""
    name = canonical_name(name)
    return FILE_TASKS.get(name.partition(":")[0]) if is_file_task(name) else TASKS.get(name)


def is_file_task(item: str) -> bool:
    """Whether ``item`` names a user's file (``KIND:PATH``) rather than a SentEval task."""
    kind, sep, _ = item.strip().partition(":")
    return bool(sep) and kind.lower() in FILE_TASKS


def group_names(group: str, split: str = "test") -> list[str]:
    """The registered tasks of ``group`` that ``split`` evaluates, in table order."""
    return [n for n in TASKS.names() if TASKS.get(n).group == group and (split == "test" or TASKS.get(n).dev_label)]


def dev_names() -> list[str]:
    return [n for n in TASKS.names() if TASKS.get(n).dev_label]


def label(name: str, split: str) -> str:
    """A task's heading in a table of ``split``'s results."""
    cls = task_class(name)
    return Path(name.partition(":")[2]).name if issubclass(cls, _FileTask) else cls.label(split)


def canonical_name(name: str) -> str:
    key = name.strip()
    if is_file_task(key):
        kind, _, path = key.partition(":")
        return f"{kind.lower()}:{path}"
    if key in TASKS:
        return key
    folded = key.lower().replace("-", "").replace("_", "")
    for known in TASKS.names():
        if folded in (known.lower(), *TASKS.get(known).aliases):
            return known
    TASKS.get(key)  # raises KeyError listing the known names
    return key


def resolve(spec: str | list[str], split: str = "test") -> list[str]:
    """Task names from groups (sts, transfer, align, all), task names and ``KIND:PATH`` files, comma-separated,
    in order."""
    if split not in SPLITS:
        raise UnknownNameError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    # A list's KIND:PATH entries stay whole (a path may hold a comma); other entries may list several.
    parts = [spec] if isinstance(spec, str) else spec
    items = [p for s in parts for p in ([s] if isinstance(spec, list) and is_file_task(s) else s.split(","))]
    names: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        lowered = item.lower()
        if lowered == "all":
            chosen = [n for group in GROUPS for n in group_names(group, split)]
        elif lowered in GROUPS:
            chosen = group_names(lowered, split)
        else:
            chosen = [canonical_name(item)]
        names += [n for n in chosen if n not in names]
    if not names:
        raise UnknownNameError("no tasks given; use sts, transfer, align, all or task names")
    return names


def build(names: list[str], data_dir: Path | None, split: str = "test",
          settings: ProbeSettings | None = None) -> list[Task]:
    """Task objects; every file the tasks need is checked first, so a missing one fails before encoding.
    ``data_dir`` (SentEval's) may be None when only ``KIND:PATH`` files are named."""
    tasks = []
    for name in names:
        cls = task_class(name)
        if issubclass(cls, _FileTask):
            tasks.append(cls(name.partition(":")[2], split=split, settings=settings))
        elif data_dir is None:
            raise formats.MissingDataError(f"{name}: needs the SentEval data directory ({formats.DOWNLOAD_HINT})")
        else:
            tasks.append(cls(data_dir=Path(data_dir), split=split, settings=settings))
    own = [f for t in tasks if isinstance(t, _FileTask) for f in t.missing_files()]
    if own:
        raise formats.MissingDataError(f"{own[0]}: {formats.why_absent(own[0])}")
    missing = [f for t in tasks for f in t.missing_files()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise formats.MissingDataError(f"{missing[0]}: not found{more}; the SentEval data is missing "
                                       f"({formats.DOWNLOAD_HINT})")
    return tasks
