"""Small name -> factory registries: augmenters, losses and poolers are found by name."""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from cselab.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A mapping from a name to a factory, with a one-line description per entry."""

    def __init__(self, kind: str, ordered: bool = False, base: type | None = None):
        self.kind = kind
        self.ordered = ordered  # names() in registration order (where the order means something: view roles)
        self.base = base  # every entry must be a subclass of it (augmenters, losses), checked as it registers
        self._factories: dict[str, Callable[..., T]] = {}
        self._descriptions: dict[str, str] = {}

    def register(self, name: str, description: str | None = None,
                 replace: bool = False) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """``@registry.register("name", "one line")`` on a factory; ``replace``: in place of the entry of
        that name (its position kept), where a name registered twice is otherwise an error."""
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories and not replace:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if self.base is not None and not (isinstance(factory, type) and issubclass(factory, self.base)):
                raise TypeError(f"{self.kind} {name!r}: {getattr(factory, '__name__', factory)} must subclass "
                                f"{self.base.__module__}.{self.base.__qualname__}")
            self._factories[name] = factory
            doc = description or (factory.__doc__ or "").strip().splitlines()[0:1]
            self._descriptions[name] = doc if isinstance(doc, str) else (doc[0] if doc else "")
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._factories[name]
        except KeyError:
            known = ", ".join(sorted(self._factories)) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def build(self, name: str, **kwargs) -> T:
        return self.get(name)(**kwargs)

    def argument_problem(self, name: str, params: dict,
                         also_allowed: tuple[str, ...] = ()) -> tuple[str | None, str] | None:
        """``(parameter or None, message)`` for the first argument of ``params`` that ``name``'s factory
        cannot take (an unknown name, a required one missing, a value not of its default's type), else
        None: a recipe is checked against the constructor's own signature before anything is built.
        ``also_allowed``: keys the caller takes off before building (a loss term's weight), named with the
        allowed ones."""
        parameters = inspect.signature(self.get(name)).parameters.values()
        named = {p.name: p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            for key in params:
                if key not in named:
                    allowed = ", ".join([*also_allowed, *named]) or "none"
                    return key, f"unknown parameter of {self.kind} {name!r} (allowed: {allowed})"
        missing = [p for p, spec in named.items() if spec.default is spec.empty and p not in params]
        if missing:
            return None, f"{self.kind} {name!r} needs {', '.join(missing)}"
        for key, value in params.items():
            wanted = wrong_type(value, named[key].default) if key in named else None
            if wanted:
                return key, f"expected {wanted}, got {shown(value)}"
        return None

    def snapshot(self) -> tuple[dict, dict]:
        """The entries as they are now, for :meth:`restore` (a test that registers entries of its own puts
        the registry back afterwards)."""
        return dict(self._factories), dict(self._descriptions)

    def restore(self, snapshot: tuple[dict, dict]) -> None:
        """The entries of ``snapshot`` again, in place (a registry is shared by reference: it stays one object)."""
        factories, descriptions = snapshot
        self._factories.clear()
        self._factories.update(factories)
        self._descriptions.clear()
        self._descriptions.update(descriptions)

    def describe(self, name: str) -> str:
        return self._descriptions[name]

    def names(self) -> list[str]:
        return list(self._factories) if self.ordered else sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def wrong_type(value: Any, default: Any) -> str | None:
    """What a parameter should be when ``value`` has not the type of its ``default`` (None: fine, or
    nothing to compare with: a default of None takes anything the factory itself accepts)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and is_finite(value)
        ok = ok and (isinstance(value, int) or not isinstance(default, int))
        return None if ok else ("an integer" if isinstance(default, int) else "a finite number")
    if isinstance(default, str):
        return None if isinstance(value, str) else "a string"
    return None


def shown(value: Any) -> str:
    """``repr(value)`` for a message, cut short: a 5,000-digit number or a long text stays readable."""
    if isinstance(value, int) and value.bit_length() > 300:  # repr of a 4,300-digit int even raises
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def is_finite(value: int | float) -> bool:
    """math.isfinite that says False for an int too large for a float (instead of raising)."""
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False
