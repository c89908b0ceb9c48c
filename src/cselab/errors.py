"""Errors that explain themselves in one line (the command line prints them without a traceback)."""
from __future__ import annotations

import re

# Line breaks (str.splitlines() knows more than \n: \x0c, \x1e, \x85, \u2028, ...) and other control
# characters; a tab stays.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def single_line(text: str) -> str:
    """``text`` with line breaks and control characters written as escapes (``\\n``, ``\\x1e``): a
    message quoting user input stays one line and cannot move a terminal's cursor."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def first_line(error: BaseException, limit: int | None = None, empty: str | None = None) -> str:
    """The first line of ``error``'s message, cut at ``limit`` characters; when it has no message, its
    class name (or ``empty``)."""
    text = str(error).strip()
    if not text:
        return type(error).__name__ if empty is None else empty
    line = text.splitlines()[0]
    return line if limit is None else line[:limit]


class CselabError(Exception):
    """The base of every error that is the user's input, not a bug: the command line prints its message
    as one line and exits 2 (anything else is shown with its traceback). Each subclass also derives
    from the builtin exception it refines (ValueError, RuntimeError, ...), so callers may catch either."""


class ConfigError(CselabError, ValueError):
    """A recipe, an override or a command-line choice is invalid; the message names the key."""

    def __init__(self, message: str):
        # A key or value typed with a newline in it must not break the one-line message.
        super().__init__(single_line(str(message)))


class TrainingError(CselabError, RuntimeError):
    """Training stopped on a fault (a non-finite loss or gradient); the message names the step."""


class ModelLoadError(CselabError, ValueError):
    """A model name or directory that cannot be loaded (missing files, no Hub access, corrupt weights)."""


class UnsafeModelError(CselabError, ValueError):
    """A model directory with pickled weights only (``pytorch_model.bin``): cselab loads safetensors only."""


class UnknownNameError(CselabError, KeyError):
    """A name (task, split, registry entry, ...) that is not one of the known ones; the message lists them."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 augmenter``, ``2 augmenters``: a count with its noun in the right number, for messages."""
    return f"{number} {noun if number == 1 else (plural or noun + 's')}"
