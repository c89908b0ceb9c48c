"""``cselab augment``: list augmenters, or augment a corpus into a resumable jsonl cache.

    cselab augment --list
    cselab augment --aug clear_word_deletion,eda_random_swap --in corpus.txt --out aug.jsonl --seed 1
    cselab augment --aug synonym_substitution --set ratio=0.3 --in corpus.txt --out aug.jsonl
    cselab augment --setup-wordnet [--wordnet-root DIR]

The input is read and cleaned exactly as training reads a corpus (``cselab.data.corpus``:
.txt/.txt.gz one sentence a line, blank lines skipped, whitespace folded; .csv/.tsv/.jsonl with
``--column``), so the cache's keys are the sentences training sees. For every sentence and every
augmenter (in that order) one JSON object ``{"original", "augmented", "augmentation", "changed"}`` is written.
Re-running the same command continues after the last complete line (a torn last line from an
interrupted run is cut off first), unless the augmenters, seed, parameters or an augmenter's
``output_revision`` differ from the run that wrote it (kept in ``<out>.settings.json``); the file
is what the ``cached`` augmenter reads.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from cselab.errors import CselabError


def register(subparsers) -> None:
    p = subparsers.add_parser("augment", help="list augmenters, or augment a corpus into a jsonl cache",
                              description=__doc__.split("\n\n")[0].strip(),
                              epilog="Params: --set KEY=VALUE applies to every augmenter given, "
                                     "--set NAME.KEY=VALUE to one; values are YAML (numbers, lists, mappings).")
    p.add_argument("--list", action="store_true", help="print every augmenter with its tag and description")
    p.add_argument("--aug", help="augmenter name(s), comma-separated")
    p.add_argument("--in", dest="input", help="text file, one sentence per line")
    p.add_argument("--out", help="output .jsonl (resumed if it exists)")
    p.add_argument("--column", help="text column of a .csv/.tsv/.jsonl input")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--set", dest="params", action="append", default=[], metavar="[NAME.]KEY=VALUE",
                   help="augmenter parameter (repeatable)")
    p.add_argument("--batch-size", type=int, default=1000, help="sentences per augment() call")
    p.add_argument("--overwrite", action="store_true", help="start the output over instead of resuming")
    p.add_argument("--setup-wordnet", action="store_true",
                   help="copy Debian's WordNet (/usr/share/wordnet) into the NLTK data root and exit")
    p.add_argument("--wordnet-root", help="NLTK data root for --setup-wordnet (default: $NLTK_DATA or "
                                          "~/.cache/cselab/nltk_data)")
    p.set_defaults(func=run)


class AugmentCliError(CselabError, ValueError):
    pass


def parse_params(items: list[str], names: list[str]) -> dict[str, dict]:
    """``--set`` items -> {augmenter name: params}."""
    import yaml

    params: dict[str, dict] = {name: {} for name in names}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise AugmentCliError(f"--set {item!r}: expected KEY=VALUE or NAME.KEY=VALUE")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise AugmentCliError(f"--set {item!r}: value is not valid YAML ({exc})") from None
        target, dot, field = key.rpartition(".")
        if dot and target not in params:
            raise AugmentCliError(f"--set {item!r}: {target!r} is not one of --aug {','.join(names)}")
        for name in ([target] if dot else names):
            params[name][field] = value
    return params


def read_sentences(path: Path, column: str | None = None) -> list[str]:
    """The corpus as training reads it (cselab.data.corpus: same cleaning), so cache keys match."""
    from cselab.data.corpus import iter_corpus

    if not path.is_file():
        what = "is a directory, not a corpus file" if path.is_dir() else "input file not found"
        raise FileNotFoundError(f"{path}: {what}")
    return list(iter_corpus(str(path), column))


def resume_point(out: Path, sentences: list[str], names: list[str]) -> int:
    """Complete records already in ``out`` (a torn last line is cut off); checks they match this run."""
    if not out.exists():
        return 0
    data = out.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut < len(data):  # an interrupted write: drop the partial line
        with open(out, "r+b") as handle:
            handle.truncate(cut)
        print(f"{out}: repaired a torn last line", file=sys.stderr)
    done = data.count(b"\n", 0, cut)
    if done:
        last = data[data.rfind(b"\n", 0, cut - 1) + 1:cut]
        try:
            record = json.loads(last)
        except json.JSONDecodeError:
            raise AugmentCliError(f"{out}:{done}: not a JSON line; use --overwrite or another --out") from None
        i, k = divmod(done - 1, len(names))
        if i >= len(sentences) or record.get("original") != sentences[i] or record.get("augmentation") != names[k]:
            raise AugmentCliError(f"{out}:{done}: written by a different input or --aug list; "
                                  "use --overwrite or another --out")
    return done


def augcse_column(name: str) -> str:
    """``augcse-N``: the smallest of AugCSE's Table 3 sets (4/8/12/16, nested) that holds ``name``."""
    from cselab.augment.augcse import AUGCSE_SUBSETS

    sizes = [size for size, names in sorted(AUGCSE_SUBSETS.items()) if name in names]
    return f"augcse-{sizes[0]}" if sizes else ""


def print_list() -> None:
    """Every augmenter: name, meaning tag, AugCSE set, description; then what the AugCSE column means."""
    from cselab.augment import AUGMENTERS

    tagged = 0
    for name in AUGMENTERS.names():
        tag, augcse = AUGMENTERS.get(name).tag, augcse_column(name)
        tagged += bool(augcse)
        print(f"{name:30s} {tag:19s} {augcse:10s} {AUGMENTERS.describe(name)}")
    print(f"\naugcse-N: one of the {tagged} augmenters of AugCSE's pool (Table 3); N is the smallest of its "
          "augmentation sets that holds it (the sets nest: 4 in 8 in 12 in 16; recipes augcse-4/-8/augcse/-16)")


def run(args) -> int:
    from cselab.augment import AUGMENTERS, build_augmenter, load_all
    from cselab.augment.base import AugmenterUnavailable
    from cselab.augment.cache import output_revisions
    from cselab.errors import counted

    try:
        if args.setup_wordnet:
            from cselab.augment.wordnet import setup_wordnet

            print(f"WordNet ready for NLTK in {setup_wordnet(args.wordnet_root)}")
            return 0
        load_all()
        if args.list:
            print_list()
            return 0
        required = (("--aug", args.aug), ("--in", args.input), ("--out", args.out))
        missing = [flag for flag, value in required if not value]
        if missing:
            raise AugmentCliError(f"{', '.join(missing)} required (or --list)")
        if args.batch_size < 1:
            raise AugmentCliError("--batch-size must be >= 1")
        names = [n.strip() for n in args.aug.split(",") if n.strip()]
        for name in names:
            AUGMENTERS.get(name)  # unknown names fail here, listing the known ones
        params = parse_params(args.params, names)
        for name in names:  # the constructor's own signature, as a recipe's parameters are checked
            problem = AUGMENTERS.argument_problem(name, params[name])
            if problem:
                key, message = problem
                raise AugmentCliError(f"augmenter {name}: {key + ': ' if key else ''}{message}")
        sentences = read_sentences(Path(args.input), args.column)
        augmenters = []
        for name in names:
            augmenter = build_augmenter(name, **params[name])
            augmenter.fit(sentences)
            augmenters.append(augmenter)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.overwrite and out.exists():
            out.unlink()
        settings = {"aug": names, "seed": args.seed, "params": params}
        # Outputs of an augmenter's older rules must not be continued with its new ones; without any revision
        # the key is left out, so files written before revisions existed still resume.
        revisions = output_revisions([{**params[name], "name": name} for name in names])
        if revisions:
            settings["output_revisions"] = revisions
        check_run_settings(out, settings)
        written = augment_file(sentences, names, augmenters, out, args.seed, args.batch_size)
    except (AugmentCliError, AugmenterUnavailable, ValueError) as exc:
        print(f"cselab augment: error: {exc}", file=sys.stderr)
        return 2
    print(f"{counted(written, 'new record')} ({counted(len(sentences), 'sentence')} x "
          f"{counted(len(names), 'augmenter')}) -> {out}")
    return 0


def check_run_settings(out: Path, settings: dict) -> None:
    """A resumed file must continue with the same augmenters, seed, parameters and output revisions (kept beside it)."""
    sidecar = out.with_name(out.name + ".settings.json")
    if out.exists() and out.stat().st_size and sidecar.is_file():
        saved = json.loads(sidecar.read_text(encoding="utf-8"))
        differing = [key for key in settings if saved.get(key) != json.loads(json.dumps(settings[key]))]
        if "output_revisions" in differing and len(differing) == 1:
            raise AugmentCliError(f"{out}: holds outputs of an older revision of "
                                  f"{', '.join(settings['output_revisions'])}'s rules; --overwrite to start over, "
                                  "or another --out")
        if differing:
            raise AugmentCliError(f"{out}: was written with a different {', '.join(differing)}; "
                                  f"use the same settings to resume, or --overwrite")
    sidecar.write_text(json.dumps(settings, ensure_ascii=False), encoding="utf-8")


def augment_file(sentences, names, augmenters, out: Path, seed: int, batch_size: int) -> int:
    from tqdm import tqdm

    done = resume_point(out, sentences, names)
    first_sentence, first_aug = divmod(done, len(names))
    written = 0
    with open(out, "a", encoding="utf-8") as handle, \
            tqdm(total=len(sentences), initial=first_sentence, unit="sent", desc="augment") as bar:
        for start in range(first_sentence, len(sentences), batch_size):
            batch = sentences[start:start + batch_size]
            outputs = [augmenter.augment(batch, seed) for augmenter in augmenters]
            lines = []
            for j, original in enumerate(batch):
                for k, name in enumerate(names):
                    if start + j == first_sentence and k < first_aug:
                        continue  # written before the interruption
                    augmented = outputs[k][j]
                    lines.append(json.dumps({"original": original, "augmented": augmented, "augmentation": name,
                                             "changed": augmented != original}, ensure_ascii=False) + "\n")
            handle.write("".join(lines))
            handle.flush()
            written += len(lines)
            bar.update(len(batch))
    return written
