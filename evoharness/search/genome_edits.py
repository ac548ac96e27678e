"""How a genome departs from the baseline, for people and records: who made each part, one row per
edit with its author's note, and a one-line summary. Pure."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.search.genome import Genome, PoolEntry, Pools


def authors(genome: Genome, pools: Pools, base_steps: Sequence[str] = ()) -> tuple[str, ...]:
    """Who made the non-baseline parts of a genome, in slot order, without repeats. A mutator's
    step counts only when the genome switches it away from the state it has without the genome
    (an appended step on; a step of the base workflow, named in ``base_steps``, off)."""
    found: list[str] = []
    found += [pools.sections[k][i].author for k, i in sorted(genome.sections.items()) if i]
    found += [pools.tools[k][i].author for k, i in sorted(genome.tools.items()) if i]
    found += [pools.steps[k].author for k, on in sorted(genome.steps.items())
              if k in pools.steps and pools.steps[k].author != "baseline" and on != (k in base_steps)]
    if genome.toolset:
        found.append(pools.toolsets[genome.toolset].author)
    if genome.context:
        found.append(pools.contexts[genome.context].author)
    if genome.escalation:
        found.append(pools.escalations[genome.escalation].author)
    if genome.max_turns:
        found.append(pools.turn_limits[genome.max_turns].author)
    return tuple(dict.fromkeys(a for a in found if a != "baseline"))


def edits(genome: Genome, pools: Pools, *, base_format: str, base_steps: Mapping[str, bool]) -> list[dict[str, str]]:
    """How a genome departs from the baseline, one edit per row: what it is, who made it
    ("search" for a pooled model, temperature or format; "base config" for a base config's own
    optional step) and the note its author gave for it."""
    rows: list[dict[str, str]] = []

    def add(edit: str, entry: PoolEntry | None, author: str = "search") -> None:
        who = entry.author if entry else author
        rows.append({"edit": edit, "author": "base config" if who == "baseline" else who, "note": entry.note if entry else ""})

    if genome.model:
        add(f"model={pools.models[genome.model].value}", None)
    if genome.temperature:
        add(f"temperature={pools.temperatures[genome.temperature].value}", None)
    if genome.tool_format and genome.tool_format != base_format:
        add(f"format={genome.tool_format}", None)
    for name, on in sorted(genome.steps.items()):
        if on != base_steps.get(name, False):
            add(f"{'+' if on else '-'}step {name}", pools.steps.get(name), "base config")
    for k, i in sorted(genome.sections.items()):
        if i:
            add(f"section {k}#{i}", pools.sections[k][i])
    for k, i in sorted(genome.tools.items()):
        if i:
            add(f"tool {k}#{i}", pools.tools[k][i])
    if genome.toolset:
        add(f"toolset#{genome.toolset}", pools.toolsets[genome.toolset])
    if genome.context:
        add(context_label(genome.context, pools.contexts[genome.context].value), pools.contexts[genome.context])
    if genome.escalation:
        model = str(pools.models[genome.model].value) if 0 <= genome.model < len(pools.models) else None
        add(escalation_label(genome.escalation, pools.escalations[genome.escalation].value, model), pools.escalations[genome.escalation])
    if genome.max_turns:
        add(f"max_turns={pools.turn_limits[genome.max_turns].value}", pools.turn_limits[genome.max_turns])
    return rows


def context_label(index: int, value: Mapping[str, Any]) -> str:
    """``context#1 (clip get_stock_info to 15,900; keep 2 turns)``: which pooled policy, and what it sends."""
    clips = [f"clip {tool} to {int(n):,}" for tool, n in sorted(dict(value.get("tool_result_chars") or {}).items())]
    keep = value.get("keep_turns")
    said = "; ".join(clips + ([f"keep {keep} turn{'s' if keep != 1 else ''}"] if keep is not None else []))
    return f"context#{index} ({said})" if said else f"context#{index}"


def escalation_what(value: Mapping[str, Any], model: str | None = None) -> str:
    """Where a pooled escalation goes and when (``to base on tool_error``); ``left out`` on a
    genome whose ``model`` is not the one it was made for (genome_to_config drops it there)."""
    target, on, made_for = value.get("model"), "+".join(str(t) for t in value.get("on") or ()), value.get("from")
    if not isinstance(target, str):
        return ""
    if model is not None and made_for is not None and made_for != model:
        return f"left out: made for {made_for}"
    return f"to {target} on {on}"


def escalation_label(index: int, value: Mapping[str, Any], model: str | None = None) -> str:
    """``escalation#2 (to base on tool_error)``: which pooled escalation, where it goes and when."""
    what = escalation_what(value, model)
    return f"escalation#{index} ({what})" if what else f"escalation#{index}"


def describe(genome: Genome, pools: Pools, *, base_format: str, base_steps: Mapping[str, bool]) -> str:
    """A short human summary of how a genome departs from the baseline, with the author of every
    mutator-made part, e.g. ``model=sim_small, format=bash, +step verify_results
    (workflow_step_append), tool place_order#1 (rule_miner)``."""
    parts = [e["edit"] + (f" ({e['author']})" if e["author"] not in ("search", "base config") else "")
             for e in edits(genome, pools, base_format=base_format, base_steps=base_steps)]
    return ", ".join(parts) or "baseline"
