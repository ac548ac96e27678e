"""The agent's workflow as a networkx DAG of steps."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import STEP_TRIGGERS


@dataclass(frozen=True)
class WorkflowStep:
    name: str
    instructions: str
    after: tuple[str, ...] = ()
    optional: bool = False
    trigger: str = "prompt"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "instructions": self.instructions, "after": list(self.after), "optional": self.optional,
                "trigger": self.trigger}


def build_workflow(steps: Sequence[Mapping[str, Any]]) -> tuple[WorkflowStep, ...]:
    """Validate the step list and return enabled steps in a stable topological order.

    Disabled optional steps are dropped; a step that came after one of them inherits its
    predecessors, so switching a step off never reorders the rest.
    """
    graph: nx.DiGraph = nx.DiGraph()
    by_name: dict[str, Mapping[str, Any]] = {}
    for i, step in enumerate(steps):
        name = step["name"]
        if name in by_name:
            raise ConfigError(f"agent.workflow[{i}].name", f"duplicate step name {name!r}", "give every step a unique name")
        trigger = step.get("trigger", "prompt")
        if trigger not in STEP_TRIGGERS:
            raise ConfigError(f"agent.workflow[{i}].trigger", f"unknown trigger {trigger!r}", f"use one of {list(STEP_TRIGGERS)}")
        if not step.get("enabled", True) and not step.get("optional", False):
            raise ConfigError(f"agent.workflow[{i}].enabled", f"step {name!r} is disabled but not optional",
                              "mark it optional: true or remove it")
        by_name[name] = step
        graph.add_node(name, index=i)
    for i, step in enumerate(steps):
        for dep in step.get("after", ()) or ():
            if dep not in by_name:
                raise ConfigError(f"agent.workflow[{i}].after", f"step {step['name']!r} comes after unknown step {dep!r}",
                                  f"use one of {sorted(by_name)}")
            graph.add_edge(dep, step["name"])
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(u for u, _ in nx.find_cycle(graph))
        raise ConfigError("agent.workflow", f"steps form a cycle ({cycle})", "remove one of the 'after' references in the cycle")
    for name, step in by_name.items():
        if not step.get("enabled", True):
            preds, succs = list(graph.predecessors(name)), list(graph.successors(name))
            graph.remove_node(name)
            graph.add_edges_from((p, s) for p in preds for s in succs)
    order = nx.lexicographical_topological_sort(graph, key=lambda n: graph.nodes[n]["index"])
    return tuple(
        WorkflowStep(
            name=n,
            instructions=str(by_name[n]["instructions"]),
            after=tuple(sorted(graph.predecessors(n), key=lambda p: graph.nodes[p]["index"])),
            optional=bool(by_name[n].get("optional", False)),
            trigger=str(by_name[n].get("trigger", "prompt")),
        )
        for n in order
    )
