"""How the pools grow between rounds, make room when a slot is full, and how a genome picks a new
entry. Pure: pools in, pools out.

Pools only grow, so an index keeps its meaning for the whole search. A full slot makes room by
retiring its oldest entry nobody picks: the entry keeps its index (stored trials still read it)
and is no longer offered to the sampler.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evoharness.search.genome import LIST_SLOTS, POLICY_SLOTS, SLOT_KINDS, Genome, PoolEntry, Pools, SlotKind


def with_pool_entry(pools: Pools, kind: SlotKind, key: str | None, entry: PoolEntry) -> tuple[Pools, bool]:
    """Append ``entry`` unless an equal value is already pooled. Returns (pools, added)."""
    if kind == "section":
        assert key is not None
        current = pools.sections[key]
        if any(e.value == entry.value for e in current):
            return pools, False
        return replace(pools, sections={**pools.sections, key: current + (entry,)}), True
    if kind == "tool":
        assert key is not None
        current = pools.tools.get(key, (PoolEntry({}, "baseline"),))
        if any(e.value == entry.value for e in current):
            return pools, False
        return replace(pools, tools={**pools.tools, key: current + (entry,)}), True
    if kind == "step":
        assert key is not None
        if key in pools.steps:  # a step's meaning never changes once pooled
            return pools, False
        return replace(pools, steps={**pools.steps, key: entry}), True
    attr = LIST_SLOTS.get(kind)
    if attr is None:
        raise ValueError(f"unknown pool kind {kind!r}; use one of {SLOT_KINDS}")
    current_t: tuple[PoolEntry, ...] = getattr(pools, attr)
    if not current_t:  # pools stored before the slot existed have no baseline to add to: index 0 must stay the baseline
        return pools, False
    if any(e.value == entry.value for e in current_t):
        return pools, False
    grown: Any = current_t + (entry,)
    return replace(pools, **{attr: grown}), True


def pool_len(pools: Pools, kind: SlotKind, key: str | None) -> int:
    """Entries in a slot's pool (a tool without edits counts its implicit baseline entry; steps
    are switches, never counted toward ``mutators.pool_size``)."""
    if kind == "section":
        return len(pools.sections.get(key or "", ()))
    if kind == "tool":
        return len(pools.tools.get(key or "", ())) or 1
    if kind == "step":
        return 0
    return len(getattr(pools, LIST_SLOTS[kind]))


def _retirable(pools: Pools, kind: SlotKind, key: str | None) -> tuple[PoolEntry, ...] | None:
    if kind == "section":
        return pools.sections.get(key or "", ())
    if kind == "tool":
        return pools.tools.get(key or "", ())
    if kind in POLICY_SLOTS:
        return tuple(getattr(pools, LIST_SLOTS[kind]))
    return None


def live_len(pools: Pools, kind: SlotKind, key: str | None) -> int:
    """Like ``pool_len``, counting only entries the sampler is still offered."""
    entries = _retirable(pools, kind, key)
    if entries is None:
        return pool_len(pools, kind, key)
    live = sum(1 for i, e in enumerate(entries) if i == 0 or not e.retired)
    return live or 1 if kind == "tool" else live


def retire_one(pools: Pools, kind: SlotKind, key: str | None, *, keep: Sequence[int]) -> tuple[Pools, bool]:
    """Retire the oldest live entry of a section, tool or policy (context, escalation) slot outside
    ``keep`` (never the baseline). Other slots are never retired: their entries are few and each
    is a distinct choice."""
    entries = _retirable(pools, kind, key)
    if entries is None or (kind in ("section", "tool") and key is None):
        return pools, False
    victim = next((i for i, e in enumerate(entries) if i and not e.retired and i not in keep), None)
    if victim is None:
        return pools, False
    grown = tuple(replace(e, retired=True) if i == victim else e for i, e in enumerate(entries))
    if kind in POLICY_SLOTS:
        policy: Any = {LIST_SLOTS[kind]: grown}
        return replace(pools, **policy), True
    assert key is not None
    if kind == "section":
        return replace(pools, sections={**pools.sections, key: grown}), True
    return replace(pools, tools={**pools.tools, key: grown}), True


def chosen(genome: Genome, kind: SlotKind, key: str | None) -> int:
    """The index a genome picks in a section, tool or list-valued slot (0 when it picks none)."""
    if kind == "section":
        return genome.sections.get(key or "", 0)
    if kind == "tool":
        return genome.tools.get(key or "", 0)
    if kind == "step":
        return 0
    return int(getattr(genome, kind))


def with_new_entry(genome: Genome, pools: Pools, kind: SlotKind, key: str | None, base_steps: Sequence[str] = (), *,
                   index: int | None = None) -> Genome:
    """``genome`` with the slot's pool entry ``index`` chosen (None: the newest). A new step is
    tried on; a required step of the base workflow (named in ``base_steps``) made switchable is
    tried off."""
    pick = pool_len(pools, kind, key) - 1 if index is None else index
    if kind == "section":
        assert key is not None
        return replace(genome, sections={**genome.sections, key: pick})
    if kind == "tool":
        assert key is not None
        return replace(genome, tools={**genome.tools, key: pick})
    if kind == "step":
        assert key is not None
        return replace(genome, steps={**genome.steps, key: key not in base_steps})
    field: Any = {kind: pick}  # toolset, model, temperature, context, escalation: a genome field each
    return replace(genome, **field)
