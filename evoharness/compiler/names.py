"""Names that become parts of paths (a study, a release slot, a component) are plain names."""
from __future__ import annotations

import re

from evoharness.compiler.errors import ConfigError

# 100 leaves room for the suffixes a name gets on disk (".json", ".lock", a temp file's) under a
# file system's 255-byte limit
MAX_NAME = 100
NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}")
NAME_RULE = f"letters, digits, '_', '-' and '.', starting with a letter or digit, at most {MAX_NAME} characters"


def is_name(value: object) -> bool:
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def study_name(workload: object, agent: object) -> str:
    """``search.study``'s default (``${evoharness.study:${workload.name},${agent.name}}``): the
    workload's name and the agent's, joined by "-", so two agents on one workload never share a
    study; the agent's alone when it already starts with the workload's (``bfcl_agent`` on ``bfcl``)."""
    w, a = str(workload), str(agent)
    return a if a.startswith(w) else f"{w}-{a}"


def checked_name(path: str, value: object, *, example: str) -> str:
    """``value`` if it is a plain name (so joining it to a directory never climbs out of it)."""
    if not is_name(value):
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f"{value[:40]!r}... ({len(value)} characters)"
        raise ConfigError(path, f"{shown} is not a plain name: it becomes part of a path", f"use {NAME_RULE}, e.g. {example}")
    assert isinstance(value, str)
    return value
