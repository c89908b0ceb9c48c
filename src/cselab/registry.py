"""Small name -> factory registries: augmenters, losses and poolers are found by name."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from cselab.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A mapping from a name to a factory, with a one-line description per entry."""

    def __init__(self, kind: str):
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._descriptions: dict[str, str] = {}

    def register(self, name: str, description: str | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
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

    def describe(self, name: str) -> str:
        return self._descriptions[name]

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
