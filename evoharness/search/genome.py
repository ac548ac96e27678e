"""The search genome and the append-only variant pools it indexes. Pure: data in, data out.

A genome picks, per slot, an entry of a pool: a prompt section's text, a tool's edit (an override of
description/rules/examples), which optional workflow steps are on, the tool list, the tool format,
the model, the temperature, the context policy (what each model call re-sends), the escalation
(where a troubled turn goes) and ``max_turns`` (the model calls a user turn may take). Pools only
grow (mutators append; ``pool_growth`` says how), so an index keeps its meaning for the whole
search; entry 0 is always the baseline.
"""
from __future__ import annotations

import copy
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from evoharness.compiler.schema import TOOL_FORMATS

SlotKind = Literal["section", "tool", "step", "toolset", "model", "temperature", "context", "escalation", "max_turns"]
SLOT_KINDS: tuple[SlotKind, ...] = get_args(SlotKind)
# the slots that hold one list-valued pool (no key), by the Pools attribute that holds it; the
# genome's field of the same name as the kind picks an index in it
LIST_SLOTS: dict[str, str] = {"toolset": "toolsets", "model": "models", "temperature": "temperatures", "context": "contexts",
                              "escalation": "escalations", "max_turns": "turn_limits"}
# list-valued slots whose entries are mutator-made policies: many, so retired like sections to make room
POLICY_SLOTS: tuple[SlotKind, ...] = ("context", "escalation")


@dataclass(frozen=True)
class PoolEntry:
    """One value a slot's pool offers the search.

    Attributes:
        value: Section text, a tool override mapping, a step config, a tool pattern list, a model
            name, a temperature, an ``agent.context`` mapping or an escalation (``{"model": <model
            config name>, "on": [triggers]}``; the baseline's is the agent's own), by the slot's kind.
        author: The mutator that made it (``"baseline"`` for entry 0).
        note: Why it was made (e.g. the failure kind it answers); never a task value.
        retired: Made room for a newer entry: kept for the trials that used it, no longer sampled.
    """

    value: Any  # section text | tool override mapping | step config | tool pattern list | model name | temperature | policy
    author: str  # mutator that made it ("baseline" for entry 0)
    note: str = ""  # why it was made (e.g. the failure it answers)
    retired: bool = False  # made room for a newer entry: kept for the trials that used it, no longer sampled

    def to_dict(self) -> dict[str, Any]:
        out = {"value": copy.deepcopy(self.value), "author": self.author, "note": self.note}
        return {**out, "retired": True} if self.retired else out


@dataclass(frozen=True)
class Pools:
    sections: Mapping[str, tuple[PoolEntry, ...]]
    tools: Mapping[str, tuple[PoolEntry, ...]] = field(default_factory=dict)  # only tools that have edits
    steps: Mapping[str, PoolEntry] = field(default_factory=dict)  # switchable steps by name; value = step config
    toolsets: tuple[PoolEntry, ...] = ()
    models: tuple[PoolEntry, ...] = ()
    temperatures: tuple[PoolEntry, ...] = ()
    formats: tuple[str, ...] = TOOL_FORMATS
    contexts: tuple[PoolEntry, ...] = ()  # agent.context mappings; empty in pools written before the slot existed
    escalations: tuple[PoolEntry, ...] = ()  # escalations; empty in pools written before the slot existed
    turn_limits: tuple[PoolEntry, ...] = ()  # max_turns values; empty in pools written before the slot existed

    def to_dict(self) -> dict[str, Any]:
        return {
            "sections": {k: [e.to_dict() for e in v] for k, v in self.sections.items()},
            "tools": {k: [e.to_dict() for e in v] for k, v in self.tools.items()},
            "steps": {k: e.to_dict() for k, e in self.steps.items()},
            "toolsets": [e.to_dict() for e in self.toolsets],
            "models": [e.to_dict() for e in self.models],
            "temperatures": [e.to_dict() for e in self.temperatures],
            "formats": list(self.formats),
            **({"contexts": [e.to_dict() for e in self.contexts]} if self.contexts else {}),
            **({"escalations": [e.to_dict() for e in self.escalations]} if self.escalations else {}),
            **({"turn_limits": [e.to_dict() for e in self.turn_limits]} if self.turn_limits else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Pools:
        def entries(xs: Sequence[Mapping[str, Any]]) -> tuple[PoolEntry, ...]:
            return tuple(PoolEntry(**x) for x in xs)

        return cls(
            sections={k: entries(v) for k, v in d["sections"].items()},
            tools={k: entries(v) for k, v in d.get("tools", {}).items()},
            steps={k: PoolEntry(**v) for k, v in d.get("steps", {}).items()},
            toolsets=entries(d.get("toolsets", [])),
            models=entries(d.get("models", [])),
            temperatures=entries(d.get("temperatures", [])),
            formats=tuple(d.get("formats", TOOL_FORMATS)),
            contexts=entries(d.get("contexts", [])),
            escalations=entries(d.get("escalations", [])),
            turn_limits=entries(d.get("turn_limits", [])),
        )


@dataclass(frozen=True)
class Genome:
    sections: Mapping[str, int] = field(default_factory=dict)  # missing = 0 (baseline)
    tools: Mapping[str, int] = field(default_factory=dict)  # missing = 0 (no edit)
    steps: Mapping[str, bool] = field(default_factory=dict)  # missing = the step's baseline state
    toolset: int = 0
    tool_format: str | None = None  # None = the agent's own
    model: int = 0
    temperature: int = 0
    context: int = 0  # 0 = the agent's own context policy
    escalation: int = 0  # 0 = the agent's own escalation (none by default)
    max_turns: int = 0  # 0 = the agent's own max_turns

    def to_dict(self) -> dict[str, Any]:
        return {
            "sections": dict(sorted(self.sections.items())),
            "tools": dict(sorted(self.tools.items())),
            "steps": dict(sorted(self.steps.items())),
            "toolset": self.toolset,
            "tool_format": self.tool_format,
            "model": self.model,
            "temperature": self.temperature,
            # only when chosen: a genome without it keeps the form (and the keys) it had before the slot existed
            **({"context": self.context} if self.context else {}),
            **({"escalation": self.escalation} if self.escalation else {}),
            **({"max_turns": self.max_turns} if self.max_turns else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Genome:
        return cls(
            sections=dict(d.get("sections", {})),
            tools=dict(d.get("tools", {})),
            steps={k: bool(v) for k, v in d.get("steps", {}).items()},
            toolset=int(d.get("toolset", 0)),
            tool_format=d.get("tool_format"),
            model=int(d.get("model", 0)),
            temperature=int(d.get("temperature", 0)),
            context=int(d.get("context", 0)),
            escalation=int(d.get("escalation", 0)),
            max_turns=int(d.get("max_turns", 0)),
        )


BASELINE = Genome()


def initial_pools(agent: Mapping[str, Any], *, models: Sequence[str], temperatures: Sequence[float], base_model: str,
                  base_temperature: float) -> Pools:
    """Pools holding only the baseline: every section's text, the agent's optional steps, its
    tool list, the configured model names (the base model first) and temperatures (base first),
    and its context policy, escalation and max_turns."""
    steps = {s["name"]: PoolEntry(dict(s), "baseline") for s in agent.get("workflow", []) if s.get("optional")}
    model_names = [base_model] + [m for m in models if m != base_model]
    temps = [float(base_temperature)] + [float(t) for t in temperatures if float(t) != float(base_temperature)]
    return Pools(
        sections={k: (PoolEntry(v, "baseline"),) for k, v in agent["prompt_sections"].items()},
        steps=steps,
        toolsets=(PoolEntry(list(agent["tools"]), "baseline"),),
        models=tuple(PoolEntry(m, "baseline") for m in model_names),
        temperatures=tuple(PoolEntry(t, "baseline") for t in temps),
        contexts=(PoolEntry(copy.deepcopy(dict(agent.get("context") or {})), "baseline"),),
        escalations=(PoolEntry(copy.deepcopy(dict(agent.get("escalation") or {})), "baseline"),),
        turn_limits=(PoolEntry(int(agent.get("max_turns", 12)), "baseline"),),
    )


def genome_to_config(
    genome: Genome, pools: Pools, *, agent: Mapping[str, Any], tool: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(agent, tool, model) config mappings of a genome; the inputs are not modified."""
    a = copy.deepcopy(dict(agent))
    t = copy.deepcopy(dict(tool))
    for name, idx in genome.sections.items():
        a["prompt_sections"][name] = _pick(pools.sections, name, idx).value
    overrides = t.setdefault("overrides", {}) or {}
    t["overrides"] = overrides
    for name, idx in genome.tools.items():
        edit = _pick(pools.tools, name, idx).value
        if edit:
            merged = dict(overrides.get(name) or {})
            for key in ("rules", "examples"):
                merged[key] = list(merged.get(key, [])) + list(edit.get(key, []))
            if edit.get("description") is not None:
                merged["description"] = edit["description"]
            if edit.get("description_append"):
                merged["description_append"] = (str(merged.get("description_append", "")) + " " + edit["description_append"]).strip()
            overrides[name] = merged
    a["workflow"] = _workflow(a.get("workflow", []), pools, genome)
    a["tools"] = list(_index(pools.toolsets, genome.toolset, "toolset").value)
    if genome.tool_format is not None:
        if genome.tool_format not in pools.formats:
            raise ValueError(f"genome tool_format {genome.tool_format!r} is not one of {pools.formats}")
        a["tool_format"] = genome.tool_format
    model_name = _index(pools.models, genome.model, "model").value
    if model_name not in models:
        raise ValueError(f"genome model {model_name!r} has no model config; known: {sorted(models)}")
    m = copy.deepcopy(dict(models[model_name]))
    m["temperature"] = float(_index(pools.temperatures, genome.temperature, "temperature").value)
    if genome.context:  # pools written before the slot existed have none, and their genomes never pick one
        a["context"] = _offered_only(_index(pools.contexts, genome.context, "context").value, a["tools"])
    if genome.escalation:
        a["escalation"] = _escalation(_index(pools.escalations, genome.escalation, "escalation").value, model_name, models)
    elif a.get("escalation"):  # the agent's own, on a genome whose model is that route: nothing to hand over
        a["escalation"] = _not_to_itself(copy.deepcopy(dict(a["escalation"])), m)
    if genome.max_turns:
        a["max_turns"] = int(_index(pools.turn_limits, genome.max_turns, "max_turns").value)
    return a, t, m


def _escalation(value: Mapping[str, Any], model_name: str, models: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """An ``agent.escalation`` mapping from a pooled escalation, its model config looked up by name.
    An escalation made for another model (its ``from``: the model whose troubles it answers, so
    never a step down for a dearer one), or to the route the genome already runs on, hands nothing
    over: it is left out."""
    target = value.get("model")
    if not isinstance(target, str):  # the baseline's own: a model config (or none) as the agent set it
        return _not_to_itself(copy.deepcopy(dict(value)), models[model_name])
    if target not in models:
        raise ValueError(f"genome escalation model {target!r} has no model config; known: {sorted(models)}")
    made_for = value.get("from")
    target_config = None if made_for is not None and made_for != model_name else copy.deepcopy(dict(models[target]))
    return _not_to_itself({"model": target_config, "on": list(value.get("on") or [])}, models[model_name])


def _not_to_itself(escalation: dict[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    target = escalation.get("model")
    if isinstance(target, Mapping) and target.get("route") == model.get("route"):
        return {**escalation, "model": None}
    return escalation


def _offered_only(context: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """A context policy without the clips of tools the genome's toolset leaves out (a clip pooled
    for one toolset, recombined with a smaller one): a policy for a tool never offered does nothing."""
    out = copy.deepcopy(dict(context))
    chars = dict(out.get("tool_result_chars") or {})
    out["tool_result_chars"] = {k: v for k, v in chars.items()
                                if k == "*" or any(fnmatch.fnmatchcase(k, str(p)) for p in patterns)}
    return out


def _workflow(base: Sequence[Mapping[str, Any]], pools: Pools, genome: Genome) -> list[dict[str, Any]]:
    steps = [dict(s) for s in base]
    names = {s["name"] for s in steps}
    for name, entry in pools.steps.items():
        if name not in names:  # appended by a mutator: off unless the genome turns it on
            steps.append({**dict(entry.value), "optional": True, "enabled": False})
        else:  # made switchable (baseline optional step, or a required step a mutator made optional)
            steps = [{**s, **dict(entry.value), "optional": True} if s["name"] == name else s for s in steps]
    for s in steps:
        if s["name"] in genome.steps:
            if not s.get("optional"):
                raise ValueError(f"genome switches step {s['name']!r}, which is not optional")
            s["enabled"] = bool(genome.steps[s["name"]])
    return steps


def _pick(pools: Mapping[str, tuple[PoolEntry, ...]], name: str, idx: int) -> PoolEntry:
    if name not in pools:
        raise ValueError(f"genome names {name!r}, which has no pool; pools: {sorted(pools)}")
    return _index(pools[name], idx, name)


def _index(entries: Sequence[PoolEntry], idx: int, what: str) -> PoolEntry:
    if not 0 <= idx < len(entries):
        raise ValueError(f"genome index {idx} for {what!r} is outside its pool of {len(entries)}")
    return entries[idx]


def canonical(genome: Genome, *, base_format: str, base_steps: Mapping[str, bool]) -> Genome:
    """The genome with every gene at its baseline left out, so two genomes that compile to the same
    variant (``Genome()`` and the baseline's full parameter form, say) are equal."""
    return Genome(
        sections={k: i for k, i in genome.sections.items() if i},
        tools={k: i for k, i in genome.tools.items() if i},
        steps={k: on for k, on in genome.steps.items() if on != base_steps.get(k, False)},
        toolset=genome.toolset,
        tool_format=None if genome.tool_format in (None, base_format) else genome.tool_format,
        model=genome.model,
        temperature=genome.temperature,
        context=genome.context,
        escalation=genome.escalation,
        max_turns=genome.max_turns,
    )
