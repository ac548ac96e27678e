"""The checks a hand-editable record's fields get when read: the outer kind of each value against
its field's annotation, and every number one a search could have written (pure)."""
from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.compiler.errors import ConfigError

FIX = "re-run the search to rewrite its records (a search writes these files; an edited one is refused)"


def check(where: str, value: Any, hint: Any) -> None:
    """``value`` is of the kind ``hint`` names (its outer kind: the record's own readers check
    inside nested records), and every number in it is one a float holds."""
    if not _fits(value, hint):
        raise ConfigError(where, f"is {_shown(value)}, not {_kind(hint)}", FIX)
    bad = _bad_number(value)
    if bad is not None:
        raise ConfigError(where, f"holds the number {_shown(bad)}, which no search writes", FIX)


def is_record(hint: Any) -> bool:
    """Whether ``hint`` is a nested record type (one with its own ``from_dict``, a genome aside)."""
    return isinstance(hint, type) and hasattr(hint, "from_dict") and hint.__name__ != "Genome"


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    target = origin or hint
    if target in (Mapping, dict) or (isinstance(target, type) and hasattr(target, "from_dict")):
        return isinstance(value, Mapping)  # a nested record arrives as a JSON object
    if target in (Sequence, list, tuple):
        return isinstance(value, list | tuple)
    return True


def _bad_number(value: Any) -> Any:
    """The first number in ``value`` that no search writes: an int beyond ±2**63, a float that is
    infinite or beyond ±1e300 (NaN a search writes for what it could not measure: readers show it
    as missing). None when there is none."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int):
            if abs(v) > 2**63:
                return v
        elif isinstance(v, float):
            if math.isinf(v) or abs(v) > 1e300:
                return v
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return None


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return f"{type(value).__name__} {text[:40]}{'…' if len(text) > 40 else ''}" if value is not None else "null"


def _kind(hint: Any) -> str:
    text = getattr(hint, "__name__", None) or str(hint)
    return text.replace("typing.", "").replace("collections.abc.", "")
