"""Augmentation speed: sentences/s of every registered augmenter, and of nlpaug's equivalents.

    python benchmarks/bench_augment.py [--limit N]

Corpus: ../shared/data/corpus/wiki1m-first-11913.txt (all lines for rule-based augmenters, a fixed
sample of 1,000 for spaCy-parsing ones and 50 for neural ones). Each augmenter is built and
warmed up on 20 sentences from outside the timed ones' order (WordNet/GloVe/spaCy loading is
not timed; per-word look-up caches start empty for the timed pass), then timed over one pass in
batches of 1,000. Also records the share of sentences each augmenter changed.

nlpaug (``pip install --no-deps nlpaug`` + ``gdown``) runs the same sentences with the same
rates. Its SynonymAug calls ``nltk.pos_tag``, whose tagger model cannot be downloaded here; it
is replaced by a stub that tags nothing, so nlpaug looks up every part of speech like cselab's
(untagged) substitution does -- this makes nlpaug faster than it really is, never slower.
Results: benchmarks/results/augment_speed.{json,md}.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no Hub here: neural augmenters without local models fail fast
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

BATCH = 1000
SAMPLE = {"cheap": None, "parse": 1000, "neural": 50}
NEURAL_MODULES = ("cselab.augment.translate", "cselab.augment.paraphrase")
PARSE_MODULES = ("cselab.augment.sda", "cselab.augment.augcse")

EXAMPLE_PARAMS = {
    "sequence": {"steps": [{"name": "clear_synonym_substitution"}, {"name": "clear_word_deletion"}]},
    "one_of": {"choices": [{"name": "random_crop"}, {"name": "eda_random_swap"}]},
    "with_probability": {"p": 0.5, "augmenter": {"name": "clear_word_deletion"}},
}

# (label, nlpaug factory, cselab name, cselab params): the same operation at the same rate.
PAIRS = [
    ("delete 10%", lambda naw: naw.RandomWordAug(action="delete", aug_p=0.1, aug_max=None),
     "eda_random_deletion", {"p": 0.1}),
    ("delete 70%", lambda naw: naw.RandomWordAug(action="delete", aug_p=0.7, aug_max=None),
     "clear_word_deletion", {"placeholder": None}),
    ("swap 10%", lambda naw: naw.RandomWordAug(action="swap", aug_p=0.1, aug_max=None),
     "eda_random_swap", {"alpha": 0.1}),
    ("crop 10%", lambda naw: naw.RandomWordAug(action="crop", aug_p=0.1, aug_max=None),
     "random_crop", {"ratio": 0.1}),
    ("WordNet synonyms 10%", lambda naw: naw.SynonymAug(aug_src="wordnet", aug_p=0.1, aug_max=None),
     "synonym_substitution", {"ratio": 0.1}),
]


def cost(factory) -> str:
    declared = getattr(factory, "cost", None)
    if declared:
        return declared
    module = getattr(factory, "__module__", "")
    return "neural" if module in NEURAL_MODULES else "parse" if module in PARSE_MODULES else "cheap"


def time_cselab(augmenter, sentences: list[str], seed: int = 0) -> dict:
    """Wall-clock and CPU-time sentences/s, and the share changed, over one pass in batches."""
    changed = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(sentences), BATCH):
        batch = sentences[i:i + BATCH]
        out = augmenter.augment(batch, seed)
        changed += sum(a != b for a, b in zip(out, batch, strict=True))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"per_second": len(sentences) / wall, "per_cpu_second": len(sentences) / cpu,
            "changed_share": changed / len(sentences)}


def time_nlpaug(augmenter, sentences: list[str]) -> dict:
    """nlpaug over the list; its crop raises on some short sentences, so a failing list is redone one by one."""
    random.seed(0)
    failures = 0
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        out = augmenter.augment(sentences)
    except ValueError:
        wall, cpu = time.perf_counter(), time.process_time()  # time only the complete one-by-one pass
        out = []
        for sentence in sentences:
            try:
                out.append(augmenter.augment(sentence)[0])
            except ValueError:
                failures += 1
                out.append(sentence)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"per_second": len(sentences) / wall, "per_cpu_second": len(sentences) / cpu,
            "changed_share": sum(a != b for a, b in zip(out, sentences, strict=True)) / len(sentences),
            "errors": failures}


def write_cache(sentences: list[str]) -> Path:
    """A `cselab augment` cache of random_crop outputs, for timing the `cached` look-up."""
    import atexit
    import tempfile

    from cselab.augment import build_augmenter
    from cselab.augment_command import augment_file

    folder = tempfile.TemporaryDirectory(prefix="bench-augment-")
    atexit.register(folder.cleanup)
    path = Path(folder.name) / "cache.jsonl"
    augment_file(sentences, ["random_crop"], [build_augmenter("random_crop")], path, 0, BATCH)
    return path


def clear_lookup_caches() -> None:
    from cselab.augment import spacy_pipeline, wordnet

    spacy_pipeline.clear_parse_cache()  # a cold pass parses every sentence
    for fn in (wordnet._synonyms, wordnet._antonyms, wordnet._hypernyms, wordnet._hyponyms, wordnet.common_lemmas):
        fn.cache_clear()


def bench_cselab(sentences: list[str], warmup: list[str]) -> list[dict]:
    from cselab.augment import AUGMENTERS, UNAVAILABLE_FAMILIES, build_augmenter, load_all

    load_all()
    rows = []
    for name in AUGMENTERS.names():
        factory = AUGMENTERS.get(name)
        kind = cost(factory)
        if SAMPLE[kind] is None:
            sample = sentences
        else:
            sample = random.Random(0).sample(sentences, min(SAMPLE[kind], len(sentences)))
        row = {"augmenter": name, "tag": getattr(factory, "tag", ""), "kind": kind, "sentences": len(sample)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                params = EXAMPLE_PARAMS.get(name, {})
                if name == "cached":
                    params = {"path": str(write_cache(sample)), "augmentation": "random_crop"}
                augmenter = build_augmenter(name, **params)
                if callable(getattr(augmenter, "fit", None)):
                    augmenter.fit(sentences)
                augmenter.augment(warmup, 1)  # load models / vectors outside the timing
                clear_lookup_caches()
                row["load_average_1min"] = os.getloadavg()[0]
                cold = time_cselab(augmenter, sample, seed=0)
                row["sentences_per_second"] = cold["per_second"]
                row["sentences_per_cpu_second"] = cold["per_cpu_second"]
                row["changed_share"] = cold["changed_share"]
                if kind == "cheap":  # second pass: look-up caches (WordNet, GloVe) warm, as later epochs
                    warm = time_cselab(augmenter, sample, seed=1)
                    row["warm_sentences_per_second"] = warm["per_second"]
                    row["warm_sentences_per_cpu_second"] = warm["per_cpu_second"]
        except Exception as exc:  # noqa: BLE001 - recorded, not hidden
            row["unavailable"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        rows.append(row)
        speed = (f"{row['sentences_per_second']:>9.0f}/s {row['sentences_per_cpu_second']:>9.0f}/cpu-s "
                 f"changed {row['changed_share']:.2f}") if "sentences_per_second" in row else row["unavailable"]
        print(f"{name:32s} {kind:7s} {speed}", flush=True)
    for family, reason in UNAVAILABLE_FAMILIES.items():
        rows.append({"augmenter": f"(module {family})", "unavailable": reason})
    return rows


def bench_nlpaug(sentences: list[str], warmup: list[str]) -> list[dict]:
    from cselab.augment import build_augmenter
    from cselab.augment.wordnet import register_with_nltk

    try:
        import nlpaug
        import nlpaug.augmenter.word as naw
        from nlpaug.model.word_dict.wordnet import WordNet
    except ImportError as exc:
        print(f"nlpaug not installed ({exc}): pip install --no-deps nlpaug gdown", file=sys.stderr)
        return []
    register_with_nltk()  # nlpaug reads nltk.corpus.wordnet: point it at our Debian copy
    # No tagger model can be downloaded: tag nothing, so every part of speech is looked up.
    WordNet.pos_tag = classmethod(lambda cls, tokens: [(t, "") for t in tokens])
    rows = []
    for label, make, name, params in PAIRS:
        ours = build_augmenter(name, **params)
        ours.augment(warmup, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = make(naw)
            time_nlpaug(theirs, warmup)
        clear_lookup_caches()
        load = os.getloadavg()[0]
        our = time_cselab(ours, sentences)
        their = time_nlpaug(theirs, sentences)
        rows.append({"operation": label, "cselab": name, "cselab_params": params, "nlpaug_version": nlpaug.__version__,
                     "cselab_sentences_per_second": our["per_second"],
                     "nlpaug_sentences_per_second": their["per_second"],
                     "cselab_sentences_per_cpu_second": our["per_cpu_second"],
                     "nlpaug_sentences_per_cpu_second": their["per_cpu_second"],
                     "speedup_wall": our["per_second"] / their["per_second"],
                     "speedup_cpu": our["per_cpu_second"] / their["per_cpu_second"],
                     "cselab_changed_share": our["changed_share"], "nlpaug_changed_share": their["changed_share"],
                     "nlpaug_errors": their["errors"], "load_average_1min": load, "sentences": len(sentences)})
        print(f"{label:22s} cselab {our['per_cpu_second']:9.0f}/cpu-s  nlpaug {their['per_cpu_second']:9.0f}/cpu-s  "
              f"x{rows[-1]['speedup_cpu']:.1f} (wall x{rows[-1]['speedup_wall']:.1f})", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="use only the first N corpus lines (quick check)")
    args = parser.parse_args()
    corpus = require_shared() / "corpus" / "wiki1m-first-11913.txt"
    lines = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    warmup, sentences = lines[-20:], lines[:-20]
    if args.limit:
        sentences = sentences[:args.limit]
    ours = bench_cselab(sentences, warmup)
    pairs = bench_nlpaug(sentences, warmup)

    rows = []
    for r in ours:
        if "sentences_per_second" in r:
            warm = r.get("warm_sentences_per_cpu_second")
            rows.append([f"`{r['augmenter']}`", r["tag"], r["kind"], r["sentences"], round(r["sentences_per_second"]),
                         round(r["sentences_per_cpu_second"]), round(warm) if warm else "",
                         f"{100 * r['changed_share']:.1f}%", round(r["load_average_1min"], 2)])
        else:
            rows.append([f"`{r['augmenter']}`", r.get("tag", ""), r.get("kind", ""), r.get("sentences", ""),
                         "unavailable", r["unavailable"], "", "", ""])
    notes = ["## cselab vs nlpaug (same sentences, same rates)", "",
             "| operation | cselab augmenter | cselab sent/CPU-s | nlpaug sent/CPU-s | speed-up (CPU) "
             "| speed-up (wall) | changed (cselab / nlpaug) | nlpaug errors | load 1 min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in pairs:
        notes.append(f"| {p['operation']} | `{p['cselab']}` | {p['cselab_sentences_per_cpu_second']:.0f} | "
                     f"{p['nlpaug_sentences_per_cpu_second']:.0f} | {p['speedup_cpu']:.1f}x | "
                     f"{p['speedup_wall']:.1f}x | "
                     f"{100 * p['cselab_changed_share']:.1f}% / {100 * p['nlpaug_changed_share']:.1f}% | "
                     f"{p['nlpaug_errors']} | {p['load_average_1min']:.2f} |")
    if not pairs:
        notes.append("| nlpaug not installed | | | | | | | | |")
    notes += ["", f"Corpus: wiki1m-first-11913.txt ({len(sentences)} sentences; spaCy-parsing augmenters on a fixed "
              f"sample of {SAMPLE['parse']}, neural ones on {SAMPLE['neural']}). One timed pass in batches of {BATCH}; "
              "model/vector loading untimed, word look-up caches cleared before timing (\"cold\"); cheap augmenters "
              "also get a second pass with warm caches, as in later epochs. sent/s is wall-clock; sent/CPU-s divides "
              "by this process's CPU time, which other jobs on the shared machine disturb much less (see the load "
              "average per row). nlpaug's SynonymAug runs with its POS tagger stubbed out (the NLTK tagger model "
              "cannot be downloaded here), which only makes it faster; nlpaug's crop raises ValueError on some "
              "sentences, which are then counted as errors and left unchanged."]
    path = write_results("augment_speed", {"corpus_sentences": len(sentences), "batch_size": BATCH, "augmenters": ours,
                                           "vs_nlpaug": pairs},
                         "Augmentation speed (sentences/s) and share of sentences changed",
                         ["augmenter", "tag", "kind", "sentences", "sent/s (cold)", "sent/CPU-s (cold)",
                          "sent/CPU-s (warm)", "changed", "load 1 min"], rows,
                         notes="\n".join(notes))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
