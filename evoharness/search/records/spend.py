"""The study's spend journal (``runs/<study>/spend.jsonl``): one line per evaluation that was paid
for, appended by the orchestrator as each batch comes back. Reads from the study's store are free
and not journaled, so a key that appears twice is an evaluation paid for twice."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.compiler.runtime.workload import Split
from evoharness.search.records.journal import append_lines, read_lines
from evoharness.search.records.versions import versioned


def spend_row(*, eval_key: str, label: str, split: Split, variant_hash: str, metrics: Mapping[str, Any],
              model_calls: int) -> dict[str, Any]:
    return versioned("spend", {
        "eval_key": eval_key, "label": label, "split": split, "variant_hash": variant_hash,
        # cost_usd is what the evaluation costs uncached: the cap counts it, so a replay a kill paid for
        # earlier is never taken as free; billed_usd is what this run itself paid
        # both null when a route has no price (the metrics omit an unknown cost): never counted as $0
        "cost_usd": _usd(metrics.get("cost_total")), "billed_usd": _usd(metrics.get("billed_cost", metrics.get("cost_total"))),
        "episodes": int(metrics.get("episodes", 0)),
        "skipped": int(metrics.get("skipped", 0)), "model_calls": model_calls,
        "attempts": int(metrics.get("attempts", model_calls)), "at": datetime.now(UTC).isoformat(),
    })


def _usd(value: Any) -> float | None:
    return None if value is None else float(value)


def mutator_spend_row(round_index: int, who: str, cost_usd: float | None, *, index: int) -> dict[str, Any]:
    """A mutator's (or the teacher's) paid model work between rounds (``index``: its place in the round)."""
    return versioned("spend", {
        "eval_key": f"r{round_index}/{who}/{index}", "label": who, "split": "mutator", "variant_hash": "", "cost_usd": _usd(cost_usd),
        "episodes": 0, "skipped": 0, "model_calls": 1, "attempts": 1, "at": datetime.now(UTC).isoformat(),
    })


def append_spend(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    append_lines(path, rows)


def read_spend(path: Path) -> list[dict[str, Any]]:
    return read_lines(path)
