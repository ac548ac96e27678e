"""Names that become parts of paths (a study, a release slot, a component) are plain names."""
from __future__ import annotations

import re

from compiler.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
NAME_RULE = "letters, digits, '_', '-' and '.', starting with a letter or digit"


def is_name(value: object) -> bool:
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def checked_name(path: str, value: object, *, example: str) -> str:
    """``value`` if it is a plain name (so joining it to a directory never climbs out of it)."""
    if not is_name(value):
        raise ConfigError(path, f"{value!r} is not a plain name: it becomes part of a path", f"use {NAME_RULE}, e.g. {example}")
    assert isinstance(value, str)
    return value
