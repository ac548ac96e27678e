"""Holdout looks (``runs/<study>/holdout_looks.jsonl``): every time a study's sealed holdout is
evaluated for a champion, one line. A look at the same champion again (a resume) is the same look;
a claim for another champion after a first look is a second look, refused unless asked for."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.search.records.journal import append_lines, read_lines
from evoharness.search.records.versions import versioned


def read_looks(path: Path) -> list[dict[str, Any]]:
    return read_lines(path)


def look_row(*, champion_hash: str, baseline_hash: str, claim: Mapping[str, Any], look: int) -> dict[str, Any]:
    return versioned("holdout_look", {
        "at": datetime.now(UTC).isoformat(), "look": look, "champion_hash": champion_hash, "baseline_hash": baseline_hash,
        "verdict": claim.get("verdict"), "mean_diff": claim.get("mean_diff"), "low": claim.get("low"), "high": claim.get("high"),
        "metric": claim.get("metric"),
    })


def append_look(path: Path, row: Mapping[str, Any]) -> None:
    append_lines(path, [row])


def champions_seen(looks: list[dict[str, Any]]) -> list[str]:
    """The champions the holdout was looked at for, first look first, each once."""
    return list(dict.fromkeys(str(r.get("champion_hash")) for r in looks))
