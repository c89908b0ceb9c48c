"""The evaluation tasks, found by name: which SentEval files each reads and how it is scored.

A task lists the files it needs (so a missing file is reported before any encoding), the unique
sentences it needs embedded, and turns their embeddings into scores. ``--split test`` is the papers'
protocol; ``--split dev`` uses only the training/dev files (STS-B dev, SICK trial, SST-2 dev,
MRPC train CV) for model selection.
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


TASKS: Registry[Callable[..., Task]] = Registry("evaluation task")

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

STS_TASKS = [*STS_YEARS, "STSBenchmark", "SICKRelatedness"]
TRANSFER_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
GROUPS = {
    "test": {"sts": STS_TASKS, "transfer": TRANSFER_TASKS, "align": ["align"]},
    "dev": {"sts": ["STSBenchmark", "SICKRelatedness"], "transfer": ["SST2", "MRPC"], "align": ["align"]},
}
ALIASES = {"stsb": "STSBenchmark", "stsbenchmark": "STSBenchmark", "sickr": "SICKRelatedness",
           "sickrelatedness": "SICKRelatedness", "sick": "SICKRelatedness", "sst": "SST2", "sst2": "SST2",
           "alignment": "align", "uniformity": "align", "alignuniform": "align"}
DISPLAY = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R", "SST2": "SST-2", "align": "Align/Uniform"}
DEV_SUPPORTED = {"STSBenchmark", "SICKRelatedness", "SST2", "MRPC", "align"}


def _unique(*lists: list[str]) -> list[str]:
    return sorted(set().union(*lists))


class _Base:
    name = ""
    group = ""

    def __init__(self, data_dir: Path, split: str = "test", settings: ProbeSettings | None = None):
        if split not in SPLITS:
            raise UnknownNameError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        if split == "dev" and self.name not in DEV_SUPPORTED:
            raise UnknownNameError(f"{self.name} has no dev split (dev evaluates: {', '.join(sorted(DEV_SUPPORTED))})")
        self.data_dir = Path(data_dir)
        self.split = split
        self.settings = settings or ProbeSettings()
        self._loaded = None

    @property
    def display(self) -> str:
        return DISPLAY.get(self.name, self.name)

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


class STSYear(_Base):
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


class STSPairs(_Base):
    """STS-B or SICK-R without training: cosine similarity vs gold on one split."""

    group = "sts"
    FILES: dict[str, str] = {}
    reader = staticmethod(formats.read_stsb)

    def relative_files(self) -> list[str]:
        return [self.FILES[self.split]]

    def load(self) -> formats.SentencePairs:
        return self.reader(self.files()[0])

    def sentences(self) -> list[str]:
        return _unique(self.data().left, self.data().right)

    def score(self, lookup: Lookup) -> dict:
        pairs = self.data()
        value = spearman100(cosine_rows(lookup(pairs.left), lookup(pairs.right)), pairs.gold)
        return {"score": value, "spearman": value, "n": len(pairs), "file": self.relative_files()[0]}


for _year in STS_YEARS:
    TASKS.register(_year, f"SemEval {_year} (Spearman, subsets pooled)")(type(_year, (STSYear,), {"name": _year}))


@TASKS.register("STSBenchmark", "STS Benchmark, test split (dev: sts-dev.csv)")
class STSBenchmark(STSPairs):
    name = "STSBenchmark"
    FILES = STSB_FILES
    reader = staticmethod(formats.read_stsb)


@TASKS.register("SICKRelatedness", "SICK relatedness, test split (dev: SICK_trial.txt)")
class SICKRelatedness(STSPairs):
    name = "SICKRelatedness"
    FILES = SICK_FILES
    reader = staticmethod(formats.read_sick)


def _score_key(split: str) -> str:
    return "acc" if split == "test" else "devacc"


class BinaryCV(_Base):
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
    TASKS.register(_name, f"{_name} sentiment/subjectivity, nested 10-fold CV")(
        type(_name, (BinaryCV,), {"name": _name}))


@TASKS.register("SST2", "SST-2 binary sentiment: train, C on dev, test (dev split: dev accuracy)")
class SST2(_Base):
    name = "SST2"
    group = "transfer"

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


@TASKS.register("TREC", "TREC question type (6 classes): C by CV on train, test on TREC_10")
class TREC(_Base):
    name = "TREC"
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


@TASKS.register("MRPC", "MRPC paraphrase, features [u, v, |u-v|, u*v] (senteval protocol: [|u-v|, u*v]): "
                        "C by CV on train, test (dev split: CV accuracy)")
class MRPC(_Base):
    name = "MRPC"
    group = "transfer"

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


@TASKS.register("align", "alignment (STS-B pairs with gold > 4) and uniformity (all STS-B sentences)")
class AlignUniform(_Base):
    name = "align"
    group = "align"

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


def canonical_name(name: str) -> str:
    key = name.strip()
    if key in TASKS:
        return key
    folded = key.lower().replace("-", "").replace("_", "")
    for known in TASKS.names():
        if known.lower() == folded:
            return known
    if folded in ALIASES:
        return ALIASES[folded]
    TASKS.get(key)  # raises KeyError listing the known names
    return key


def resolve(spec: str | list[str], split: str = "test") -> list[str]:
    """Task names from groups (sts, transfer, align, all) and/or task names, comma-separated, in order."""
    if split not in SPLITS:
        raise UnknownNameError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    items = spec.split(",") if isinstance(spec, str) else [p for s in spec for p in s.split(",")]
    names: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        lowered = item.lower()
        if lowered == "all":
            chosen = [n for group in GROUPS[split].values() for n in group]
        elif lowered in GROUPS[split]:
            chosen = GROUPS[split][lowered]
        else:
            chosen = [canonical_name(item)]
        names += [n for n in chosen if n not in names]
    if not names:
        raise UnknownNameError("no tasks given; use sts, transfer, align, all or task names")
    return names


def build(names: list[str], data_dir: Path, split: str = "test", settings: ProbeSettings | None = None) -> list[Task]:
    """Task objects; every file the tasks need is checked first, so a missing one fails before encoding."""
    tasks = [TASKS.get(canonical_name(n))(data_dir=Path(data_dir), split=split, settings=settings) for n in names]
    missing = [f for t in tasks for f in t.missing_files()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise formats.MissingDataError(f"{missing[0]}: not found{more}; the SentEval data is missing "
                                       f"({formats.DOWNLOAD_HINT})")
    return tasks
