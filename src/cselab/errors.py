"""Errors that explain themselves in one line (the command line prints them without a traceback)."""
from __future__ import annotations


class ConfigError(ValueError):
    """A recipe, an override or a command-line choice is invalid; the message names the key."""

    def __init__(self, message: str):
        # A key or value typed with a newline in it must not break the one-line message.
        super().__init__(str(message).replace("\r", "\\r").replace("\n", "\\n"))


class TrainingError(RuntimeError):
    """Training stopped on a fault (a non-finite loss or gradient); the message names the step."""


class ModelLoadError(ValueError):
    """A model name or directory that cannot be loaded (missing files, no Hub access, corrupt weights)."""


class UnsafeModelError(ValueError):
    """A model directory with pickled weights only (``pytorch_model.bin``): cselab loads safetensors only."""


class UnknownNameError(KeyError):
    """A name (task, split, registry entry, ...) that is not one of the known ones; the message lists them."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
