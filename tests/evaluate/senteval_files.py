"""Writes a generated SentEval directory in the exact file formats (never lines of ../shared)."""
from __future__ import annotations

import random
from pathlib import Path

from cselab.evaluate.tasks import STS_YEARS

SUBJECTS = ["the cat", "a dog", "my neighbour", "the old man", "a child", "the teacher", "our team", "the bird",
            "a farmer", "the pilot", "her sister", "the chef"]
VERBS = ["sees", "likes", "paints", "finds", "follows", "builds", "reads", "carries", "sells", "cleans"]
OBJECTS = ["a red ball", "the river", "a small house", "the letter", "an apple", "the garden", "a song",
           "the map", "a blue car", "the window", "a wooden box", "the bridge"]


class SentenceMaker:
    """Distinct generated sentences (each call returns one never returned before)."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.used: set[str] = set()

    def __call__(self) -> str:
        while True:
            s = (f"{self.rng.choice(SUBJECTS)} {self.rng.choice(VERBS)} {self.rng.choice(OBJECTS)} "
                 f"{self.rng.randint(0, 999)} .")
            if s not in self.used:
                self.used.add(s)
                return s


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))


def make_senteval(root: Path, pairs_per_subset: int = 6, per_class: int = 24, seed: int = 0) -> Path:
    """Every file of SentEval's layout that cselab reads, tiny, with the formats' quirks."""
    rng = random.Random(seed)
    sentence = SentenceMaker(seed)
    for year, subsets in STS_YEARS.items():
        for subset in subsets:
            inputs, golds = [], []
            for i in range(pairs_per_subset):
                inputs.append(f"{sentence()}\t{sentence()}")
                # blank gold line = unscored pair (STS16 has many)
                golds.append("" if i == 2 else f"{rng.uniform(0, 5):.3f}")
            write(root / f"STS/{year}-en-test/STS.input.{subset}.txt", "\n".join(inputs) + "\n")
            write(root / f"STS/{year}-en-test/STS.gs.{subset}.txt", "\n".join(golds) + "\n")
    for split in ("train", "dev", "test"):
        lines = []
        for i in range(12):
            extra = "\tsource-a\tsource-b" if i % 3 == 0 else ""  # some STS-B lines carry extra columns
            lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{rng.uniform(0, 5):.3f}\t"
                         f"{sentence()}\t\"{sentence()}\"{extra}")
        write(root / f"STS/STSBenchmark/sts-{split}.csv", "\n".join(lines) + "\n")
    for name in ("train", "trial", "test_annotated"):
        lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        lines += [f"{i}\t{sentence()}\t{sentence()}\t{rng.uniform(1, 5):.1f}\tNEUTRAL" for i in range(12)]
        write(root / f"SICK/SICK_{name}.txt", "\n".join(lines) + "\n")
    for folder, positive, negative in (("MR", "rt-polarity.pos", "rt-polarity.neg"),
                                       ("CR", "custrev.pos", "custrev.neg"),
                                       ("SUBJ", "subj.subjective", "subj.objective"),
                                       ("MPQA", "mpqa.pos", "mpqa.neg")):
        for file, word in ((positive, "wonderful"), (negative, "dreadful")):
            lines = [f"{sentence()} {word}" for _ in range(per_class)]
            # latin-1 bytes, as in the real MR/CR files
            write(root / folder / file, ("\n".join(lines) + "\nthe caf\xe9 was " + word + " .\n").encode("latin-1"))
    for split in ("train", "dev", "test"):
        lines = [f"{sentence()} {'great' if i % 2 else 'awful'} \t{i % 2}" for i in range(2 * per_class)]
        write(root / f"SST/binary/sentiment-{split}", "\n".join(lines) + "\n")
    classes = ["ABBR:exp", "DESC:manner", "ENTY:animal", "HUM:ind", "LOC:city", "NUM:date"]
    for file in ("train_5500.label", "TREC_10.label"):
        lines = [f"{classes[i % 6]} What {sentence()} {classes[i % 6].split(':')[0].lower()} ?" for i in range(6 * 12)]
        write(root / "TREC" / file, ("\n".join(lines) + "\n").encode("latin-1"))
    for split in ("train", "test"):
        lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(2 * per_class):
            a = sentence()
            b = a if i % 2 else sentence()
            lines.append(f"{i % 2}\t{1000 + i}\t{2000 + i}\t{a}\t{b}")
        write(root / f"MRPC/msr_paraphrase_{split}.txt", "\n".join(lines) + "\n")
    return root
