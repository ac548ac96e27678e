"""Tools a workload's tasks need that the agent does not offer: such a task cannot pass whatever
the harness says, and scores 0 without a word unless someone counts. Pure: names in, counts out."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from evoharness.compiler.runtime.workload import Task


def missing_tools(offered: Iterable[str], tasks: Sequence[Task]) -> dict[str, int]:
    """Per tool a task's reference calls use but ``offered`` lacks: how many tasks need it."""
    have = set(offered)
    counts: dict[str, int] = {}
    for task in tasks:
        for name in sorted({c.name for turn in task.gold for c in turn} - have):
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def coverage_warning(offered: Iterable[str], tasks: Sequence[Task], *, where: str = "") -> str | None:
    """One line when some tasks need a tool the agent does not offer, else None."""
    have = set(offered)
    needing = [t for t in tasks if any(c.name not in have for turn in t.gold for c in turn)]
    if not needing:
        return None
    counts = missing_tools(have, needing)
    shown = ", ".join(f"{n} ({k})" for n, k in list(counts.items())[:5]) + (", ..." if len(counts) > 5 else "")
    return (f"warning: {len(needing)} of {len(tasks)} {where + ' ' if where else ''}tasks call tools the agent does not offer: "
            f"{shown}; those tasks cannot pass. Fix: add the tools to agent.tools (or drop the tasks)")
