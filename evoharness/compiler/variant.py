"""HarnessVariant: the compiled, frozen, content-hashed harness, and the pure compiler.

``compile_agent`` touches no disk: configs in, a variant out. The hash covers everything the
model will see (system prompt, native tools, injected step messages) plus the model params and
the turn budget, over canonical JSON, so the same inputs give the same hash in any process.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from evoharness.compiler.catalog import build_catalog, select_tools
from evoharness.compiler.configpath import template_dirs
from evoharness.compiler.context_policy import ContextPolicy, context_policy
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.escalation import Escalation, escalation
from evoharness.compiler.names import checked_name
from evoharness.compiler.render import (
    render_bash_usage,
    render_openai_tool,
    render_system_prompt,
    render_text,
    render_tools_intro,
)
from evoharness.compiler.route import ModelParams, RouteSettings, model_route
from evoharness.compiler.schema import SECTION_ROLES, TOOL_FORMATS
from evoharness.compiler.secrets import find_secret
from evoharness.compiler.template_budget import bounded
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.workflow import WorkflowStep, build_workflow

HASH_SCHEMA = 1


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CompiledTool:
    spec: ToolSpec
    native: Mapping[str, Any]  # OpenAI tools entry
    usage: str  # bash usage block

    @property
    def name(self) -> str:
        return self.spec.name


def step_message(step: WorkflowStep) -> str:
    return f'<workflow_step name="{step.name}">\n{step.instructions.strip()}\n</workflow_step>'


@dataclass(frozen=True)
class HarnessVariant:
    agent: str
    prompt_body: str
    tool_format: str
    tools: tuple[CompiledTool, ...]
    workflow: tuple[WorkflowStep, ...]
    model: ModelParams
    max_turns: int
    route: RouteSettings = field(default_factory=RouteSettings)
    content_hash: str = ""
    context: ContextPolicy = field(default_factory=ContextPolicy)  # what of the conversation each call re-sends
    escalation: Escalation | None = None  # where the rest of a troubled turn goes
    # the tools entry per offered selection, built once: every model call of every episode sends it
    _native: dict[tuple[str, ...] | None, list[dict[str, Any]]] = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- what the model sees ------------------------------------------------------------
    def _selected(self, tool_names: Iterable[str] | None) -> tuple[CompiledTool, ...]:
        if tool_names is None:
            return self.tools
        wanted = set(tool_names)
        return tuple(t for t in self.tools if t.name in wanted)

    def system_prompt_for(self, tool_names: Iterable[str] | None = None) -> str:
        """The system prompt offering only ``tool_names`` (all tools when None)."""
        if self.tool_format == "json":
            return self.prompt_body
        blocks = [render_tools_intro(self.tool_format)] + [t.usage for t in self._selected(tool_names)]
        return self.prompt_body + "\n" + "\n".join(blocks)

    @property
    def system_prompt(self) -> str:
        return self.system_prompt_for(None)

    def native_tools_for(self, tool_names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` entry offering ``tool_names`` (all when None). The same list for the
        same selection: callers send it and must not change it."""
        if self.tool_format == "bash":
            return []
        key = None if tool_names is None else tuple(tool_names)
        if key not in self._native:
            self._native[key] = [json.loads(json.dumps(t.native)) for t in self._selected(key)]
        return self._native[key]

    def step_messages(self, trigger: str) -> tuple[tuple[str, str], ...]:
        """(step name, message) for the steps the harness injects at ``trigger``."""
        return tuple((s.name, step_message(s)) for s in self.workflow if s.trigger == trigger)

    def hashed_payload(self) -> dict[str, Any]:
        return {
            "hash_schema": HASH_SCHEMA,
            "system_prompt": self.system_prompt,
            "native_tools": self.native_tools_for(None),
            "tool_format": self.tool_format,
            "step_messages": [list(m) for m in self.step_messages("before_final")],
            "model": self.model.to_dict(),
            "max_turns": self.max_turns,
            # only when set: a variant without a policy keeps the hash it had before policies existed
            **({"context": self.context.to_dict()} if self.context else {}),
            **({"escalation": self.escalation.hashed()} if self.escalation else {}),
        }

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "content_hash": self.content_hash,
            "agent": self.agent,
            "prompt_body": self.prompt_body,
            "tool_format": self.tool_format,
            "tools": [t.spec.to_dict() for t in self.tools],
            "workflow": [s.to_dict() for s in self.workflow],
            "model": self.model.to_dict(),
            "max_turns": self.max_turns,
            "route": self.route.to_dict(),
            **({"context": self.context.to_dict()} if self.context else {}),
            **({"escalation": self.escalation.to_dict()} if self.escalation else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HarnessVariant:
        """Rebuild a written variant; refuses one whose content does not match its hash."""
        specs = [ToolSpec.from_dict(t) for t in data["tools"]]
        variant = _assemble(
            agent=data["agent"],
            prompt_body=data["prompt_body"],
            tool_format=data["tool_format"],
            specs=specs,
            workflow=tuple(WorkflowStep(s["name"], s["instructions"], tuple(s["after"]), s["optional"], s["trigger"])
                           for s in data["workflow"]),
            model=ModelParams(**data["model"]),
            max_turns=int(data["max_turns"]),
            route=RouteSettings(**data.get("route", {})),
            context=ContextPolicy.from_dict(data.get("context")),
            escalation=Escalation.from_dict(data["escalation"]) if data.get("escalation") else None,
        )
        if data.get("content_hash") != variant.content_hash:
            raise ValueError(
                f"variant content does not match its hash {data.get('content_hash')!r} (recomputed {variant.content_hash!r}); "
                "it was edited or corrupted: recompile it from its config"
            )
        return variant


def _assemble(
    *,
    agent: str,
    prompt_body: str,
    tool_format: str,
    specs: list[ToolSpec],
    workflow: tuple[WorkflowStep, ...],
    model: ModelParams,
    max_turns: int,
    route: RouteSettings,
    context: ContextPolicy,
    escalation: Escalation | None = None,
) -> HarnessVariant:
    tools = tuple(CompiledTool(spec=s, native=render_openai_tool(_with_examples(s)), usage=render_bash_usage(s)) for s in specs)
    draft = HarnessVariant(agent, prompt_body, tool_format, tools, workflow, model, max_turns, route, context=context,
                           escalation=escalation)
    return HarnessVariant(agent, prompt_body, tool_format, tools, workflow, model, max_turns, route, content_hash(draft.hashed_payload()),
                          context=context, escalation=escalation)


def _with_examples(spec: ToolSpec) -> ToolSpec:
    # Native tools have no examples field, so examples ride in the description where the model sees them.
    if not spec.examples:
        return spec
    return replace(spec, description=spec.description.rstrip() + "".join(f"\nExample: {e}" for e in spec.examples))


def compile_agent(agent: Mapping[str, Any], *, tool: Mapping[str, Any], model: Mapping[str, Any]) -> HarnessVariant:
    """Compile plain config mappings (agent, tool catalog, model) into a HarnessVariant."""
    checked_name("agent.name", agent.get("name"), example="bfcl_agent")  # registry slots and snapshots are keyed by it
    tool_format = agent.get("tool_format", "json")
    if tool_format not in TOOL_FORMATS:
        raise ConfigError("agent.tool_format", f"unknown tool format {tool_format!r}", f"use one of {list(TOOL_FORMATS)}")
    max_turns = int(agent.get("max_turns", 12))
    if max_turns < 1:
        raise ConfigError("agent.max_turns", f"must be at least 1, got {max_turns}", "set agent.max_turns to a positive integer")
    sections = dict(agent.get("prompt_sections") or {})
    if not sections:
        raise ConfigError("agent.prompt_sections", "no prompt sections", "give the agent at least one named section")
    for name, role in dict(agent.get("section_roles") or {}).items():
        if name not in sections:
            raise ConfigError(f"agent.section_roles.{name}", "names no prompt section", f"use one of {sorted(sections)}")
        if role not in SECTION_ROLES:
            raise ConfigError(f"agent.section_roles.{name}", f"unknown role {role!r}", f"use one of {list(SECTION_ROLES)}")
    leaked = find_secret({"model": dict(model)})
    if leaked:
        raise ConfigError(leaked, "looks like a credential; it would be written into the compiled variant and every record",
                          "put the NAME of an environment variable in model.api_key_env instead")
    params, settings = model_route(model)
    escalate = escalation(agent.get("escalation"))
    specs = list(select_tools(agent.get("tools") or [], build_catalog(tool)))
    context_rule = context_policy(agent.get("context"), tools=[s.name for s in specs])
    workflow = build_workflow(list(agent.get("workflow") or []))
    context = {
        "agent_name": agent["name"],
        "tool_format": tool_format,
        "tool_names": [s.name for s in specs],
        **dict(agent.get("vars") or {}),
    }
    # One render budget for all of the compile's templates (bounded per template alone, twenty sections
    # each just under the bound would take minutes), opened once the tool modules are imported: their
    # import time is not template work.
    with bounded():
        workflow = tuple(
            replace(s, instructions=render_text(f"agent.workflow[{s.name}].instructions", s.instructions, context)) for s in workflow
        )
        body = render_system_prompt(
            template=str(agent.get("template", "system_prompt.md.j2")), sections=sections, steps=workflow, tools=specs, context=context,
            template_dirs=template_dirs(),
        )
    return _assemble(
        agent=str(agent["name"]),
        prompt_body=body,
        tool_format=tool_format,
        specs=specs,
        workflow=workflow,
        model=params,
        max_turns=max_turns,
        route=settings,
        context=context_rule,
        escalation=escalate,
    )
