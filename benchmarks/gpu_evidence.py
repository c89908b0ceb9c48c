"""The Python steps of benchmarks/gpu_evidence.sh (see that script for the whole procedure).

    python benchmarks/gpu_evidence.py sample WIKI N OUT          # a seeded sample, as training reads lines
    python benchmarks/gpu_evidence.py head CORPUS.gz N OUT.gz     # the first N lines (the smoke run's corpus)
    python benchmarks/gpu_evidence.py tokenizer DIR               # the offline base's tokenizer (bert-base-uncased)
    python benchmarks/gpu_evidence.py recipes NAME...             # every name is a recipe (else one line, status 2)
    python benchmarks/gpu_evidence.py labels RECIPE               # the recipe's label augmenters, comma-separated
    python benchmarks/gpu_evidence.py split CACHE.jsonl DIR       # one cache file per augmentation, DIR/NAME.jsonl
    python benchmarks/gpu_evidence.py check SAMPLE DIR NAME...    # every sample sentence cached for every NAME
    python benchmarks/gpu_evidence.py label-set RECIPE DIR        # --set value: the recipe's labels read from DIR
    python benchmarks/gpu_evidence.py block DIR NAME...           # packages made unimportable (the smoke run)
    python benchmarks/gpu_evidence.py title ENCODER_DIR TEXT      # TEXT with the validation MLM loss reached

Each prints what the script needs, or one line on stderr and exit status 2.
"""
from __future__ import annotations

import gzip
import inspect
import json
import sys
from pathlib import Path

SAMPLE_SEED = 0  # the wiki sample: one seeded draw shared by every method and seed (paired comparisons)


class Refusal(Exception):
    """A one-line reason this step cannot be done."""


def sample(wiki: str, size: str, out: str) -> None:
    """``size`` lines of ``wiki`` drawn with SAMPLE_SEED, cleaned as training reads them (cselab's reader:
    the cache keys are then exactly the sentences the runs look up)."""
    from cselab.data.indexed import read_corpus

    sentences, _ = read_corpus(wiki, max_sentences=int(size), seed=SAMPLE_SEED)
    Path(out).write_text("".join(f"{line}\n" for line in sentences), encoding="utf-8")
    print(f"{len(sentences)} sentences -> {out}")


def head(corpus: str, lines: str, out: str) -> None:
    with gzip.open(corpus, "rt", encoding="utf-8") as source, gzip.open(out, "wt", encoding="utf-8") as target:
        for number, line in enumerate(source):
            if number == int(lines):
                break
            target.write(line)


def tokenizer(directory: str) -> None:
    """The offline base model's tokenizer alone (bert-base-uncased's WordPiece vocabulary, under 1 MB): the
    vocabulary of the encoder pre-trained from scratch. The model package itself (88 MB) does not travel."""
    from transformers import AutoTokenizer

    from cselab.sources import resolve_model_path

    AutoTokenizer.from_pretrained(resolve_model_path("minilm")).save_pretrained(directory)


def label_names(recipe: str) -> list[str]:
    from cselab.config import load_config
    from cselab.config.validation import label_augmenters

    return [name for _, name, _ in label_augmenters(load_config(recipe).views)]


def recipes(*names: str) -> None:
    """Each name loads as a recipe (an unknown one is a one-line error before any work)."""
    from cselab.config import load_config

    for name in names:
        load_config(name)


def labels(recipe: str) -> None:
    print(",".join(label_names(recipe)))


def split(cache: str, directory: str) -> None:
    """One file per augmentation, in the format `cselab augment` writes (lines kept as they are): each of a
    run's `cached` entries then reads only its own type's lines."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    handles = {}
    try:
        with open(cache, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    name = json.loads(line)["augmentation"]
                except (ValueError, KeyError, TypeError):
                    raise Refusal(f"{cache}:{number}: not a `cselab augment` line") from None
                if name not in handles:
                    handles[name] = open(out / f"{name}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
                handles[name].write(line)
    finally:
        for handle in handles.values():
            handle.close()
    print(f"{len(handles)} augmentations -> {directory}")


def check(sample_file: str, directory: str, *names: str) -> None:
    """Every sentence of the sample has an output of every augmentation named (else a run would train on
    unchanged text for the missing ones, silently)."""
    from cselab.augment.cache import read_cache

    sentences = Path(sample_file).read_text(encoding="utf-8").splitlines()
    for name in names:
        path = Path(directory) / f"{name}.jsonl"
        if not path.is_file():
            raise Refusal(f"{path}: no cache of {name}")
        table = read_cache(path, name)
        missing = [s for s in sentences if s not in table]
        if missing:
            raise Refusal(f"{path}: {len(missing)} of {len(sentences)} sample sentences have no {name} output "
                          f"(first: {missing[0]!r})")
        changed = sum(table[s][0] != s for s in sentences)
        print(f"{name}: {len(sentences)} sentences, {changed} changed ({100 * changed / len(sentences):.1f}%)")


def label_set(recipe: str, directory: str) -> None:
    """``views.label=[...]``: the recipe's own label augmenters, in its order, each as a `cached` entry reading
    its file (so the discriminator's label k is the recipe's k-th augmentation, as when run on the fly)."""
    entries = [{"name": "cached", "path": str(Path(directory).resolve() / f"{name}.jsonl"), "augmentation": name}
               for name in label_names(recipe)]
    print("views.label=" + json.dumps(entries))  # JSON is YAML: --set reads it back as written


def block(directory: str, *names: str) -> None:
    """A package per name whose import fails, to put first on PYTHONPATH: the smoke run then has only what the
    GPU machine has, and any step that would need one of them fails there as it would on the device."""
    for name in names:
        package = Path(directory) / name
        package.mkdir(parents=True, exist_ok=True)
        message = f"{name} is not installed on the GPU machine (gpu_evidence.sh --smoke imitates it)"
        (package / "__init__.py").write_text(f"raise ImportError({message!r})\n", encoding="utf-8")


def title(encoder: str, text: str) -> None:
    summary = json.loads((Path(encoder) / "summary.json").read_text(encoding="utf-8"))
    loss = summary.get("best_val_mlm_loss")
    if loss is None:
        raise Refusal(f"{encoder}/summary.json: no validation MLM loss (best_val_mlm_loss)")
    print(f"{text} (validation MLM loss {loss:.3f} at step {summary.get('best_step')})")


STEPS = {"sample": sample, "head": head, "tokenizer": tokenizer, "recipes": recipes, "labels": labels, "split": split,
         "check": check, "label-set": label_set, "block": block, "title": title}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in STEPS:
        print(f"gpu_evidence.py: expected one of {', '.join(STEPS)}", file=sys.stderr)
        return 2
    from cselab.errors import CselabError

    step = STEPS[argv[0]]
    try:
        inspect.signature(step).bind(*argv[1:])
    except TypeError as exc:
        print(f"gpu_evidence.py {argv[0]}: wrong arguments ({exc}); see the module's docstring", file=sys.stderr)
        return 2
    try:
        step(*argv[1:])
    except (Refusal, CselabError, OSError) as exc:
        print(f"gpu_evidence.py {argv[0]}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
