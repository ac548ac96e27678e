"""Extension points registered by name. Built-ins are import paths, so looking one up never
imports the others (bfcl-eval, say, is imported only when the bfcl workload is used)."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class NamedRegistry(Generic[T]):
    def __init__(self, kind: str, *, builtins: Mapping[str, str], decorator: str) -> None:
        self.kind = kind  # e.g. "workload", for messages
        self.builtins = dict(builtins)  # name -> "module:attribute"
        self.decorator = decorator  # how a user registers one, for messages
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(entry: T) -> T:
            self._entries[name] = entry
            return entry

        return decorate

    def names(self) -> list[str]:
        return sorted(set(self._entries) | set(self.builtins))

    def get(self, name: str) -> T:
        if name not in self._entries and name in self.builtins:
            module, _, attr = self.builtins[name].partition(":")
            self._entries[name] = getattr(importlib.import_module(module), attr)
        if name not in self._entries:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {self.names()}; register one with {self.decorator}")
        return self._entries[name]
