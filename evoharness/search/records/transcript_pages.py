"""The pages a search's report links to: each front member's episodes beside the incumbent's, on
dev when the member was run there, else on train, written under ``<study>/transcripts/`` by the
finish, with the tasks the member failed (the report lists them, each a link to its task)."""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.search.records.transcript_view import Side, study_sides, write_view

HASH = re.compile(r"[0-9a-f]{12,64}")
# a page's path from the study's folder: what the finish writes and the only link the report offers
# (summary.json is hand-editable: a link never leaves the study's folder or carries a scheme)
PAGE = re.compile(r"transcripts/[0-9a-f]{12}-(dev|train)\.html")


def page_path(variant_hash: str, split: str) -> str:
    return f"transcripts/{variant_hash[:12]}-{split}.html"


def failed_tasks(member: Side, incumbent: Side) -> list[str]:
    """The tasks the member failed in any sample, those the incumbent passed in every sample
    first (where the member lost ground), each group in task order."""
    def failing(side: Side) -> set[str]:
        return {str(e["task_id"]) for e in side.episodes if e.get("passed") is not True}

    lost, theirs = failing(member), failing(incumbent)
    return sorted(lost - theirs) + sorted(lost & theirs)


def front_pages(study: Path, *, baseline: str, members: Sequence[tuple[str, str, bool]]) -> dict[str, dict[str, Any]]:
    """For each front member, given as (label, variant hash, has a dev run): its page, split and
    failed tasks, by variant hash. A member whose evaluations kept no transcripts (a study searched
    by an evoharness that kept none) has no page; nothing here stops the finish."""
    out: dict[str, dict[str, Any]] = {}
    folder = study / "transcripts"
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):  # the pages stay inside the study's folder
        return out
    for split in ("dev", "train"):
        chosen = [(label, h) for label, h, dev in members if (split == "dev") == dev and h != baseline]
        if not chosen:
            continue
        try:
            # every page is written in one folder: the records' paths are named from it
            sides = study_sides(study / "evals", [("incumbent", baseline), *chosen], split, page=folder / "page.html")
        except ConfigError:  # a sidecar that does not cover its record: no pages for this split
            continue
        incumbent = sides[0]
        if incumbent is None:
            continue
        for (label, h), side in zip(chosen, sides[1:]):
            if side is None or not HASH.fullmatch(h):  # a page's file name is made from the hash: a content hash only
                continue
            page = study / page_path(h, split)
            try:
                write_view([incumbent, side], page, title=f"{study.name}: incumbent vs {label} ({split})")
            except (ConfigError, OSError):
                continue
            out[h] = {"page": os.path.relpath(page, study), "split": split, "failed": failed_tasks(side, incumbent)}
    return out

