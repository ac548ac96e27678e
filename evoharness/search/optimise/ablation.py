"""Where a champion's gain comes from: a sequential ablation on dev. Pure but for the evaluations
it asks for.

From the incumbent, one layer at a time: the champion's model with the base harness; then the
harness settings that are not a mutator's work (the base config's own optional steps, the tool
format, a pooled temperature); then the mutator-authored entries (section texts, tool edits, steps
and tool lists a mutator made). Each layer's share is its dev quality over the previous layer's,
and its cost per task beside it: a lever that cuts the bill earns its keep there, not in quality.
It answers "would I ship it for its edits, or is it the model swap?" without a holdout look.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from evoharness.compiler.runtime.workload import Split
from evoharness.search.genome import BASELINE, Genome, Pools, canonical

Layer = tuple[str, Genome]


def layers(champion: Genome, pools: Pools, *, base_format: str, base_steps: Mapping[str, bool]) -> list[Layer]:
    """(name, genome) from the incumbent to the champion; a layer that changes nothing is left out."""
    def mutator_made(entry_author: str) -> bool:
        return entry_author != "baseline"

    steps = {k: v for k, v in champion.steps.items() if k in pools.steps and not mutator_made(pools.steps[k].author)}
    temperature = champion.temperature if not mutator_made(pools.temperatures[champion.temperature].author) else 0
    toolset = champion.toolset if not mutator_made(pools.toolsets[champion.toolset].author) else 0
    model = Genome(model=champion.model)
    settings = replace(model, steps=steps, tool_format=champion.tool_format, temperature=temperature, toolset=toolset)
    out: list[Layer] = []
    previous = BASELINE
    for name, g in (("model", model), ("harness settings", settings), ("mutator edits", champion)):
        if canonical(g, base_format=base_format, base_steps=base_steps) == canonical(previous, base_format=base_format,
                                                                                     base_steps=base_steps):
            continue
        out.append((name, g))
        previous = g
    return out


def decompose(incumbent_q: float, measured: Sequence[tuple[str, float | None]], *, incumbent_cost: float | None = None,
              costs: Sequence[float | None] = ()) -> list[dict[str, Any]]:
    """Each layer's quality and its gain over the layer before (None when it could not be measured);
    with ``costs`` (one per layer), its cost per task and the change over the layer before."""
    rows, before, paid = [], incumbent_q, incumbent_cost
    for i, (name, q) in enumerate(measured):
        row: dict[str, Any] = {"layer": name, "quality": q, "gain": None if q is None or before is None else q - before}
        if costs:
            cost = costs[i] if i < len(costs) else None
            row["cost_per_task"] = cost
            row["cost_change"] = None if cost is None or not paid else cost / paid - 1.0
            paid = cost  # a layer not measured leaves the next one's change unknown, never credited with two layers' saving
        rows.append(row)
        before = q if q is not None else before
    return rows


def ablation_jobs(champion: Genome, pools: Pools, *, base_format: str, base_steps: Mapping[str, bool]
                  ) -> tuple[list[Layer], list[tuple[Genome, Split, str]]]:
    """The layers, and the dev evaluations the intermediate ones need (the last layer is the champion,
    already measured): asked for with the holdout's, in the same batch."""
    todo = layers(champion, pools, base_format=base_format, base_steps=base_steps)
    return todo, [(g, "dev", f"ablation-{name.replace(' ', '-')}-dev") for name, g in todo[:-1]]


def ablation_rows(todo: Sequence[Layer], results: Sequence[Any], *, incumbent_q: float, champion_q: float,
                  metric: str, incumbent_cost: float | None = None, champion_cost: float | None = None) -> list[dict[str, Any]]:
    """The table from the intermediate layers' results (in ``ablation_jobs`` order) and the champion's
    quality (and cost per task, when the incumbent's is given)."""
    measured: list[tuple[str, float | None]] = []
    costs: list[float | None] = []
    for (name, _), res in zip(todo[:-1], results):
        metrics = getattr(getattr(res, "report", None), "metrics", None)
        measured.append((name, float(metrics[metric]) if metrics and metric in metrics else None))
        cost = metrics.get("cost_per_task") if metrics else None
        costs.append(float(cost) if isinstance(cost, (int, float)) else None)
    if todo:
        measured.append((todo[-1][0], champion_q))
        costs.append(champion_cost)
    return decompose(incumbent_q, measured, incumbent_cost=incumbent_cost, costs=costs if incumbent_cost is not None else ())
