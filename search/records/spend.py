"""The study's spend journal (``runs/<study>/spend.jsonl``): one line per evaluation that was paid
for, appended by the orchestrator as each batch comes back. Reads from the study's store are free
and not journaled, so a key that appears twice is an evaluation paid for twice.

Appends are single ``write`` calls on an O_APPEND file, fsynced: a kill leaves every earlier line
whole and at worst a torn last line, which the reader skips.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compiler.secrets import scrub
from search.records.versions import versioned


def spend_row(*, eval_key: str, label: str, split: str, variant_hash: str, metrics: Mapping[str, Any],
              model_calls: int) -> dict[str, Any]:
    return versioned("spend", {
        "eval_key": eval_key, "label": label, "split": split, "variant_hash": variant_hash,
        "cost_usd": float(metrics.get("cost_total", 0.0)), "episodes": int(metrics.get("episodes", 0)),
        "skipped": int(metrics.get("skipped", 0)), "model_calls": model_calls,
        "attempts": int(metrics.get("attempts", model_calls)), "at": datetime.now(UTC).isoformat(),
    })


def append_spend(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
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


def read_spend(path: Path) -> list[dict[str, Any]]:
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
