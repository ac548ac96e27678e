"""The genome as Optuna sees it: one categorical parameter per slot that has a choice, fixed for a
round (the pools grow between rounds), and the two directions between a genome and its
parameters. Pure."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.search.genome import Genome, PoolEntry, Pools


def param_space(pools: Pools) -> dict[str, tuple[Any, ...]]:
    """Categorical choices per Optuna parameter. Fixed for one round (pools grow between rounds)."""
    space: dict[str, tuple[Any, ...]] = {}

    def live(entries: Sequence[PoolEntry]) -> tuple[int, ...]:
        return tuple(i for i, e in enumerate(entries) if i == 0 or not e.retired)

    for name, entries in sorted(pools.sections.items()):
        if len(live(entries)) > 1:
            space[f"section.{name}"] = live(entries)
    for name, entries in sorted(pools.tools.items()):
        if len(live(entries)) > 1:
            space[f"tool.{name}"] = live(entries)
    for name in sorted(pools.steps):
        space[f"step.{name}"] = (False, True)
    if len(pools.toolsets) > 1:
        space["toolset"] = tuple(range(len(pools.toolsets)))
    space["tool_format"] = tuple(pools.formats)
    if len(pools.models) > 1:
        space["model"] = tuple(range(len(pools.models)))
    if len(pools.temperatures) > 1:
        space["temperature"] = tuple(range(len(pools.temperatures)))
    if len(live(pools.contexts)) > 1:
        space["context"] = live(pools.contexts)
    if len(live(pools.escalations)) > 1:
        space["escalation"] = live(pools.escalations)
    if len(pools.turn_limits) > 1:
        space["max_turns"] = tuple(range(len(pools.turn_limits)))
    return space


def params_to_genome(params: Mapping[str, Any]) -> Genome:
    sections = {k.split(".", 1)[1]: int(v) for k, v in params.items() if k.startswith("section.")}
    tools = {k.split(".", 1)[1]: int(v) for k, v in params.items() if k.startswith("tool.")}
    steps = {k.split(".", 1)[1]: bool(v) for k, v in params.items() if k.startswith("step.")}
    return Genome(
        sections=sections,
        tools=tools,
        steps=steps,
        toolset=int(params.get("toolset", 0)),
        tool_format=params.get("tool_format"),
        model=int(params.get("model", 0)),
        temperature=int(params.get("temperature", 0)),
        context=int(params.get("context", 0)),
        escalation=int(params.get("escalation", 0)),
        max_turns=int(params.get("max_turns", 0)),
    )


def genome_to_params(genome: Genome, pools: Pools, *, base_format: str, base_steps: Mapping[str, bool]) -> dict[str, Any]:
    """Full parameter dict for ``param_space(pools)`` (used to enqueue known genomes)."""
    space = param_space(pools)
    params: dict[str, Any] = {}
    for key in space:
        kind, _, name = key.partition(".")
        if kind == "section":
            params[key] = genome.sections.get(name, 0)
        elif kind == "tool":
            params[key] = genome.tools.get(name, 0)
        elif kind == "step":
            params[key] = genome.steps.get(name, base_steps.get(name, False))
        elif key == "tool_format":
            params[key] = genome.tool_format or base_format
        else:
            params[key] = getattr(genome, key)
    return params
