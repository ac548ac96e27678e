"""Schema versions of the JSON records a run writes, and the check every reader makes.

A record written before versioning has no ``schema_version``: it is version 1, the layout it has.
eval 2: ``priced`` added, and an unpriced route's costs are null (version 1 wrote them as 0);
spend 2: ``cost_usd``/``billed_usd`` null for an unpriced route; sweep_summary 2: a job's ``priced``;
summary 2: a trial row's ``race`` (a proposal's paired evidence against its anchor) and ``state`` ``PRUNED``;
a summary 1 is a summary 2 without race records, so it is still read (``ALSO_READ``).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evoharness.compiler.errors import ConfigError

# record kind -> the version this code writes and reads
VERSIONS = {"summary": 2, "claim": 1, "freeze": 1, "eval": 2, "trial_result": 1, "spend": 2, "holdout_look": 1,
            "sweep_summary": 2, "doctor": 1, "transcript": 1}

# record kind -> older versions this code still reads as they are (a later version only added to them)
ALSO_READ: dict[str, tuple[int, ...]] = {"summary": (1,)}


def versioned(kind: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its kind's schema_version first."""
    return {"schema_version": VERSIONS[kind], **{k: v for k, v in record.items() if k != "schema_version"}}


def checked(kind: str, record: Any, source: str | Path) -> dict[str, Any]:
    """``record`` if this code can read it; else a one-line ConfigError naming the file and the fix."""
    if not isinstance(record, Mapping):
        raise ConfigError(str(source), f"is not a {kind} record (a JSON object expected, got {type(record).__name__})",
                          "point at the file the search wrote, or re-run it")
    found = record.get("schema_version", 1)
    # True == 1 and 1.0 == 1: neither is a version
    if type(found) is not int or (found != VERSIONS[kind] and found not in ALSO_READ.get(kind, ())):
        raise ConfigError(f"{source}: schema_version",
                          f"{kind} record version {found!r} is not the version {VERSIONS[kind]} this evoharness reads",
                          "use the evoharness version that wrote it, or re-run to rewrite the record")
    return dict(record)
