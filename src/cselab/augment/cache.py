"""Augmentations computed once for a whole corpus, then looked up (AugCSE and UNA + paraphrasing).

``cached`` reads augmentations from a jsonl file of ``{"original", "augmented", "augmentation",
"changed"}`` lines, one of two ways:

- ``path``: a file written beforehand by ``cselab augment``. ``augmentation`` keeps only lines of
  that augmenter (a file written with ``--aug a,b`` holds both); ``augmenter: {name: ...}``
  augments sentences missing from the file (without it they come back unchanged).
- no ``path``, an ``augmenter``: ``fit(corpus)`` (the training loop calls it before the first step)
  writes the file itself, for every sentence of the training corpus, with a progress bar, into
  ``$CSELAB_CACHE/augmented/`` (default ``~/.cache/cselab/augmented/``) under a name made of the
  augmenter's name and a digest of its parameters, ``seed`` and the ``output_revision`` of any
  augmenter in it (nested ones included), and a digest of the corpus's
  sentences: never relative to the working directory. The file is built as ``<name>.part``, a
  chunk of ``chunk_size`` sentences per write, flushed to disk, so a killed build resumes where it
  stopped (a torn last line is cut off); it gets its final name when complete, and any later run
  on the same corpus with the same augmenter reads it without augmenting again. Outputs already
  computed for another corpus with the same augmenter are reused, not recomputed.
  ``augmenter`` may be a list: the first that can be built here is used (PEGASUS when its model is
  available, else back-translation), and a cache already complete for an earlier entry is read
  without building that augmenter at all.

When a sentence has several cached outputs, ``choose: first`` (default, AugCSE's fixed sampling)
takes the first, ``choose: random`` draws one per (seed, sentence).
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import random
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cselab import citations
from cselab.augment.base import AUGMENTERS, Augmenter, AugmenterUnavailable, register_augmenter, sentence_seed
from cselab.augment.compose import build_spec
from cselab.errors import CselabError
from cselab.file_writes import write_text_atomically

log = logging.getLogger("cselab.augment")

#: Part of every cache key: a change of the file layout must not read what an older one wrote.
CACHE_FORMAT = 1
#: Parameters that change how fast an augmenter runs, not what it writes: left out of the key.
SPEED_ONLY = frozenset({"progress", "num_threads", "device"})


class CacheFileError(CselabError, ValueError):
    """A malformed line in an augmentation cache file."""


def read_cache(path: str | Path, augmentation: str | None = None) -> dict[str, list[str]]:
    """original -> augmented texts, in file order. A torn (unterminated, unparsable) last line is ignored."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: augmentation cache not found (write it with `cselab augment`)")
    table: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    torn_last = lines and lines[-1] != ""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            original, augmented = record["original"], record["augmented"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            if torn_last and number == len(lines):
                warnings.warn(f"{path}:{number}: ignoring a torn last line (an interrupted `cselab augment`)",
                              stacklevel=2)
                continue
            raise CacheFileError(f"{path}:{number}: not a cache line with 'original' and 'augmented' ({exc})") from None
        if augmentation is not None and record.get("augmentation") != augmentation:
            continue
        table.setdefault(original, []).append(augmented)
    return table


def record_line(original: str, augmented: str, augmentation: str) -> str:
    """One cache line, as ``cselab augment`` writes it."""
    return json.dumps({"original": original, "augmented": augmented, "augmentation": augmentation,
                       "changed": augmented != original}, ensure_ascii=False) + "\n"


# --- caches built on first use ------------------------------------------------------------------


def cache_root() -> Path:
    """``$CSELAB_CACHE/augmented``: beside the corpus indexes of ``cselab.data.indexed`` (same variable)."""
    return Path(os.environ.get("CSELAB_CACHE", Path.home() / ".cache" / "cselab")).expanduser() / "augmented"


def corpus_digest(sentences: Sequence[str]) -> str:
    """SHA-256 of the sentences as training reads them (cleaned, sampled, without held-out lines)."""
    digest = hashlib.sha256()
    for i in range(len(sentences)):
        digest.update(sentences[i].encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def augmenter_spec(spec: Any, where: str) -> dict:
    """``"name"`` or ``{name: ..., <params>}`` as a mapping (a copy)."""
    if isinstance(spec, str):
        return {"name": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"{where}: expected an augmenter name or a mapping with a 'name' key, got {spec!r}")
    return dict(spec)


def output_revisions(spec: Any) -> dict[str, int]:
    """``{name: output_revision}`` of every augmenter named in ``spec`` whose revision is not 0, sorted by name.

    An augmenter whose rules changed declares a class attribute ``output_revision``, so outputs of its old rules
    are not reused. ``spec`` is walked whole: the augmenters nested in ``sequence`` steps, ``one_of`` choices,
    ``with_probability``/``cached`` augmenters... count too, as mappings with a ``name`` or as bare names (any
    string naming a revised augmenter: at worst a cache is rebuilt once more than needed).
    """
    from cselab.augment import load_all  # every family registered: a revised augmenter is never missed

    load_all()
    found: dict[str, int] = {}

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if node in AUGMENTERS:
                revision = AUGMENTERS.get(node).output_revision
                if revision:
                    found[node] = revision
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item)

    walk(spec)
    return dict(sorted(found.items()))


def spec_digest(spec: dict, seed: int) -> str:
    """What decides the outputs: the augmenter's name and parameters (not the speed ones), the seed."""
    kept = {key: value for key, value in spec.items() if key not in SPEED_ONLY}
    key = [CACHE_FORMAT, kept, seed]
    # Revisions of the augmenters in the spec (nested ones included); none = left out, which keeps the existing
    # caches of every augmenter without a revision valid.
    revisions = output_revisions(kept)
    if revisions:
        key.append({"output_revision": revisions})
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """One process at a time (the processes of a multi-process run all build the same cache)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class CorpusAugmentations:
    """One augmenter's output for every sentence of one corpus: a jsonl in corpus order, built resumably."""

    def __init__(self, spec: dict, seed: int, corpus_key: str, root: Path):
        self.spec, self.seed = spec, seed
        self.family = f"{spec['name']}-{spec_digest(spec, seed)[:16]}"
        self.path = root / f"{self.family}-{corpus_key[:16]}.jsonl"
        self.part = self.path.with_name(self.path.name + ".part")

    def complete(self) -> bool:
        return self.path.is_file()

    def read(self) -> dict[str, list[str]]:
        return read_cache(self.path)

    def build(self, augmenter, sentences: Sequence[str], chunk_size: int) -> None:
        from tqdm import tqdm

        with exclusive(self.path.with_name(self.path.name + ".lock")):
            if self.complete():
                return  # another process built it while this one waited
            done = self._resume_point(sentences)
            known = self._outputs_of_other_corpora(sentences)
            self._write_description(len(sentences))
            with open(self.part, "a", encoding="utf-8") as handle, \
                    tqdm(total=len(sentences), initial=done, unit="sent", desc=f"{self.spec['name']} cache") as bar:
                for start in range(done, len(sentences), chunk_size):
                    chunk = [sentences[i] for i in range(start, min(start + chunk_size, len(sentences)))]
                    handle.write("".join(self._chunk_lines(augmenter, chunk, known)))  # whole lines, one write
                    handle.flush()
                    os.fsync(handle.fileno())  # on disk before the bar moves: a kill loses at most one chunk
                    bar.update(len(chunk))
            os.replace(self.part, self.path)

    def _chunk_lines(self, augmenter, chunk: list[str], known: dict[str, str]) -> list[str]:
        todo = list(dict.fromkeys(s for s in chunk if s not in known))
        if todo:
            known.update(zip(todo, augmenter.augment(todo, self.seed), strict=True))
        return [record_line(s, known[s], self.spec["name"]) for s in chunk]

    def _resume_point(self, sentences: Sequence[str]) -> int:
        """Complete lines already in the part file (a torn last line cut off), checked against the corpus."""
        if not self.part.is_file():
            return 0
        data = self.part.read_bytes()
        cut = data.rfind(b"\n") + 1
        done = data.count(b"\n", 0, cut)
        last = data[data.rfind(b"\n", 0, cut - 1) + 1:cut] if done else b""
        try:
            fits = not done or (done <= len(sentences) and json.loads(last)["original"] == sentences[done - 1])
        except (ValueError, KeyError, TypeError):
            fits = False
        if not fits:
            warnings.warn(f"{self.part}: does not continue this corpus; starting it over", stacklevel=3)
            cut = done = 0
        if cut < len(data):
            with open(self.part, "r+b") as handle:
                handle.truncate(cut)
        if done:
            log.info("%s: resuming after %d of %d sentences", self.part, done, len(sentences))
        return done

    def _outputs_of_other_corpora(self, sentences: Sequence[str]) -> dict[str, str]:
        """Outputs this augmenter already wrote for other corpora (another sample of the same file)."""
        others = [path for path in self.path.parent.glob(f"{self.family}-*.jsonl") if path != self.path]
        if not others:
            return {}
        wanted = {sentences[i] for i in range(len(sentences))}
        known: dict[str, str] = {}
        for path in others:
            for original, outputs in read_cache(path).items():
                if original in wanted:
                    known.setdefault(original, outputs[0])
        return known

    def _write_description(self, count: int) -> None:
        """What the file holds, beside it (for people: the name already says it)."""
        description = {"format": CACHE_FORMAT, "augmenter": self.spec, "seed": self.seed, "sentences": count}
        write_text_atomically(self.path.with_suffix(".json"), json.dumps(description, ensure_ascii=False, indent=1))


def build_quietly(spec: dict, where: str):
    """The augmenter of ``spec``, without a progress bar of its own when it has one (the cache shows one)."""
    from cselab.augment import AUGMENTERS, load_all

    load_all()
    factory = AUGMENTERS.get(spec["name"])
    if "progress" not in spec and "progress" in inspect.signature(factory).parameters:
        spec = {**spec, "progress": False}
    return build_spec(spec, where)


# --- the augmenter --------------------------------------------------------------------------------


@register_augmenter
class Cached(Augmenter):
    citation = ""  # per instance: the cached augmenters'
    name = "cached"
    tag = "possibly-altering"  # per instance: the tag of the cached augmenter when known
    description = ("look augmentations up: a `cselab augment` jsonl (path), or one built for the corpus on first use "
                   "(augmenter)")

    def __init__(self, path: str | None = None, augmentation: str | None = None, augmenter: Any = None,
                 choose: str = "first", seed: int = 0, chunk_size: int = 64):
        if choose not in ("first", "random"):
            raise ValueError(f"cached: 'choose' must be 'first' or 'random', got {choose!r}")
        if path is None and augmenter is None:
            raise ValueError("cached: needs 'path' (a `cselab augment` jsonl) or 'augmenter' (to build the cache "
                             "for the training corpus on first use)")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"cached: 'chunk_size' must be an integer >= 1, got {chunk_size!r}")
        specs = augmenter if isinstance(augmenter, list) else [] if augmenter is None else [augmenter]
        if augmenter is not None and not specs:
            raise ValueError("cached: 'augmenter' is an empty list")
        self.path = None if path is None else str(path)
        self.augmentation = augmentation
        self.choose = choose
        self.seed = seed
        self.chunk_size = chunk_size
        self.specs = [augmenter_spec(spec, f"cached.augmenter[{k}]") for k, spec in enumerate(specs)]
        self.citation = citations.join(*(AUGMENTERS.get(s["name"]).citation for s in self.specs
                                         if s["name"] in AUGMENTERS))
        self.table: dict[str, list[str]] = {}
        self.fallback = None
        self.cache_file: Path | None = None  # the file read, once known
        self._fallback_spec: dict | None = None  # built on the first miss, when the cache made it unnecessary
        self.hits = 0
        self.misses = 0
        self._rng = random.Random(0)
        if self.path is not None:
            self._read_given_file()
        else:
            self.tag = _tag_of(self.specs[0]["name"], self.tag)

    def _read_given_file(self) -> None:
        self.table = read_cache(self.path, self.augmentation)
        self.cache_file = Path(self.path).expanduser()
        if not self.table:
            warnings.warn(f"{self.path}: no cached augmentations"
                          + (f" named {self.augmentation!r}" if self.augmentation else ""), stacklevel=3)
        if self.specs:
            self.fallback = self._first_available()[1]
            self.tag = self.fallback.tag
        elif self.augmentation:
            self.tag = _tag_of(self.augmentation, self.tag)

    def _first_available(self) -> tuple[dict, Any]:
        reasons = []
        for k, spec in enumerate(self.specs):
            try:
                return spec, build_quietly(spec, f"cached.augmenter[{k}]")
            except AugmenterUnavailable as exc:
                reasons.append(f"{spec['name']}: {exc}")
                if k + 1 < len(self.specs):
                    warnings.warn(f"cached: {spec['name']} is not available here ({exc}); trying "
                                  f"{self.specs[k + 1]['name']}", stacklevel=3)
        raise AugmenterUnavailable(f"cached: no augmenter of the list can run here ({'; '.join(reasons)})")

    def fit(self, corpus: Sequence[str]) -> Cached:
        """With no ``path``: read, or first build, the cache of ``corpus`` (see the module docstring)."""
        if self.path is not None:
            if self.fallback is not None:
                self.fallback.fit(corpus)
            return self
        key, root = corpus_digest(corpus), cache_root()
        for k, spec in enumerate(self.specs):
            store = CorpusAugmentations(spec, self.seed, key, root)
            if store.complete():  # read without building the augmenter (a PEGASUS model stays unloaded)
                log.info("cached: reading %s", store.path)
                return self._use(store, spec, None)
            try:
                augmenter = build_quietly(spec, f"cached.augmenter[{k}]")
            except AugmenterUnavailable as exc:
                if k + 1 == len(self.specs):
                    raise
                warnings.warn(f"cached: {spec['name']} is not available here ({exc}); trying "
                              f"{self.specs[k + 1]['name']}", stacklevel=2)
                continue
            augmenter.fit(corpus)
            log.info("cached: augmenting %d sentences with %s into %s (once; resumable)", len(corpus), spec["name"],
                     store.path)
            store.build(augmenter, corpus, self.chunk_size)
            return self._use(store, spec, augmenter)
        raise AssertionError("unreachable: the last augmenter either builds or raises")

    def _use(self, store: CorpusAugmentations, spec: dict, augmenter) -> Cached:
        self.table = store.read()
        self.cache_file = store.path
        self.fallback, self._fallback_spec = augmenter, spec
        self.tag = _tag_of(spec["name"], self.tag) if augmenter is None else augmenter.tag
        return self

    @property
    def parts(self) -> tuple[Augmenter, ...]:
        """The augmenter for sentences missing from the cache, once built."""
        return () if self.fallback is None else (self.fallback,)

    def augmented_texts(self) -> list[str]:
        """Every cached output (UNA fits its TF-IDF on the originals plus these)."""
        if self.cache_file is None:
            raise RuntimeError("cached: no cache yet; fit(corpus) reads or builds it")
        return [text for outputs in self.table.values() for text in outputs]

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        out = list(sentences)
        missing = []
        for i, sentence in enumerate(sentences):
            options = self.table.get(sentence)
            if not options:
                missing.append(i)
            elif len(options) == 1 or self.choose == "first":
                out[i] = options[0]
            else:
                self._rng.seed(sentence_seed(seed, sentence))
                out[i] = options[self._rng.randrange(len(options))]
        self.hits += len(sentences) - len(missing)
        self.misses += len(missing)
        fallback = self._fallback_for_misses() if missing else None
        if fallback is not None:
            for i, text in zip(missing, fallback.augment([sentences[i] for i in missing], seed), strict=True):
                out[i] = text
        return out

    def _fallback_for_misses(self):
        if self.fallback is None and self._fallback_spec is not None:
            self.fallback = build_quietly(self._fallback_spec, "cached.augmenter")
        return self.fallback


def _tag_of(name: str, default: str) -> str:
    from cselab.augment import AUGMENTERS, load_all

    load_all()
    return AUGMENTERS.get(name).tag if name in AUGMENTERS else default
