"""Holdout looks: every evaluation of a variant other than the incumbent on a sealed holdout is a
look at it, and a claim is read in the light of how many variants the split has been looked at for.

The count is the union (distinct variants) of three sources, so no one file resets it:

* the study's own journal, ``runs/<study>/holdout_looks.jsonl``: a line per champion the study
  claimed, with its verdict;
* the study's evidence of what it ran: its stored evaluations (``runs/<study>/evals/``) and its
  spend journal (``spend.jsonl``) name every holdout evaluation the study paid for or kept, so
  deleting them deletes the results themselves;
* the registry's journal, ``<registry_dir>/holdout_looks.jsonl``, shared by every study and every
  ``evaluate workload.split=holdout`` on that registry. Its lines name the sealed split they looked
  at (the splits hash a search froze, and the holdout's own hash, which ``evaluate`` computes too),
  so a new ``search.study`` on the same split sees the earlier looks. Writers hold
  ``<registry_dir>/holdout_looks.jsonl.lock`` (two processes may share one registry).

A look at the same variant again (a resume) is the same look, not a new one.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from evoharness.compiler.variant import content_hash
from evoharness.search.records.journal import append_lines, read_lines
from evoharness.search.records.versions import versioned

LOOKS_FILE = "holdout_looks.jsonl"


def holdout_hash(workload: str, task_ids: Iterable[str]) -> str:
    """The sealed split's identity: the workload and its holdout task ids (all of them, in any
    order: ``evaluate`` with ``workload.limit`` looks at part of the same split)."""
    return content_hash({"workload": workload, "holdout": sorted(str(t) for t in task_ids)})


@dataclass(frozen=True)
class Seal:
    """The sealed split looks are counted under: a search knows both hashes, ``evaluate`` only the
    holdout's (its train cut is a search setting)."""

    holdout_hash: str
    splits_hash: str | None = None
    # the holdout's clusters (Task.cluster, named by workload): a look at any of them under other
    # workload options (another category set, a per-split limit, an edited tasks file) saw part of this seal
    clusters: frozenset[str] = frozenset()

    def covers(self, row: Mapping[str, Any]) -> bool:
        seen = row.get("holdout_clusters")
        return bool((self.splits_hash and row.get("splits_hash") == self.splits_hash)
                    or (self.holdout_hash and row.get("holdout_hash") == self.holdout_hash)
                    or (self.clusters and isinstance(seen, list) and self.clusters.intersection(map(str, seen))))


def looked_at(row: Mapping[str, Any]) -> str | None:
    """The variant a journal line looked at (a search's champion, or the variant `evaluate` ran)."""
    found = row.get("champion_hash") or row.get("variant_hash")
    return str(found) if found else None


def read_looks(path: Path) -> list[dict[str, Any]]:
    return read_lines(path)


def look_row(*, champion_hash: str, baseline_hash: str, claim: Mapping[str, Any], look: int, study: str | None = None,
             seal: Seal | None = None) -> dict[str, Any]:
    """A study journal's line: the claim made on the look."""
    return versioned("holdout_look", {
        "at": datetime.now(UTC).isoformat(), "look": look, "champion_hash": champion_hash, "baseline_hash": baseline_hash,
        "verdict": claim.get("verdict"), "mean_diff": claim.get("mean_diff"), "low": claim.get("low"), "high": claim.get("high"),
        "metric": claim.get("metric"), **({"study": study} if study else {}), **(_seal_keys(seal) if seal else {}),
    })


def registry_row(*, variant_hash: str, by: str, seal: Seal, **extra: Any) -> dict[str, Any]:
    """A registry journal's line, written before the holdout is run: ``by`` is ``search`` (with the
    study, its champion and incumbent) or ``evaluate``."""
    return versioned("holdout_look", {"at": datetime.now(UTC).isoformat(), "by": by, "variant_hash": variant_hash,
                                      **_seal_keys(seal), **extra})


def _seal_keys(seal: Seal) -> dict[str, Any]:
    return {"splits_hash": seal.splits_hash, "holdout_hash": seal.holdout_hash,
            **({"holdout_clusters": sorted(seal.clusters)} if seal.clusters else {})}


def append_look(path: Path, row: Mapping[str, Any]) -> None:
    append_lines(path, [row])


class RegistryLooks:
    """``<registry_dir>/holdout_looks.jsonl``: the looks of every study and ``evaluate`` run on one
    registry. Read, decide and append under ``locked()``, so two processes cannot both take what
    each saw as the first look."""

    def __init__(self, registry_dir: str | Path) -> None:
        self.path = Path(registry_dir) / LOOKS_FILE

    @contextlib.contextmanager
    def locked(self) -> Iterator[RegistryLooks]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            yield self

    def rows(self) -> list[dict[str, Any]]:
        return read_lines(self.path)

    def append(self, row: Mapping[str, Any]) -> None:
        append_lines(self.path, [row])


def stored_looks(evals: Path, spend: Path) -> list[str]:
    """The variants a study evaluated on the holdout, from what it ran: its stored evaluations and
    its spend journal (an evaluation with skipped episodes is not stored, but it was paid for)."""
    found: list[str] = []
    for row in read_lines(spend):
        if row.get("split") == "holdout" and row.get("variant_hash"):
            found.append(str(row["variant_hash"]))
    for path in sorted(evals.glob("*.json")) if evals.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8")
            if '"holdout"' not in text:  # a train or dev evaluation: no need to parse it
                continue
            record = json.loads(text)
        except (OSError, ValueError):  # one the store cannot read is refused by name when it is read for its result
            continue
        if isinstance(record, dict) and record.get("split") == "holdout" and record.get("variant_hash"):
            found.append(str(record["variant_hash"]))
    return list(dict.fromkeys(found))


def seen_looks(*, study: str, journal: Path, evals: Path, spend: Path, registry_rows: Iterable[Mapping[str, Any]], seal: Seal,
               exclude: Iterable[str]) -> dict[str, list[str]]:
    """The variants the sealed split has been looked at for, each once (first seen first), with
    where each was seen. ``exclude``: the incumbent and the reference, whose runs are no look at a
    candidate."""
    skip = set(exclude)
    seen: dict[str, list[str]] = {}

    def note(variant: str | None, where: str) -> None:
        if variant and variant not in skip and where not in seen.setdefault(variant, []):
            seen[variant].append(where)

    for row in read_lines(journal):
        note(looked_at(row), f"study {study!r}")
    for variant in stored_looks(evals, spend):
        note(variant, f"study {study!r}")
    for shared in registry_rows:
        if seal.covers(shared):
            by = f"study {shared['study']!r}" if shared.get("study") else f"`evoharness {shared.get('by') or 'evaluate'}`"
            note(looked_at(shared), by)
    return seen
