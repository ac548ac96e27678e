"""Append-only JSON-lines journals under a study (spend, holdout looks): one ``write`` call per
batch on an O_APPEND file, fsynced, so a kill leaves every earlier line whole and at worst a torn
last line, which the reader skips."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evoharness.compiler.secrets import scrub


def append_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    text = "".join(json.dumps(dict(r), sort_keys=True) + "\n" for r in rows)
    if not text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, scrub(text).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole line of the journal (a torn last line, from a kill mid-append, is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
