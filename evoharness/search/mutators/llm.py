"""LLM-backed mutators: any litellm route rewrites a section or adds a workflow step.

Request format (what ``compiler/sim/rewriter.py`` answers offline; keep the two in step). One
chat request per proposal: a system message, then one user message made of tagged blocks::

    <task>rewrite_section | add_workflow_step | teacher_gap</task>
    <section_name>policy</section_name>            rewrite_section, teacher_gap
    <current>\n...the section's current text...\n</current>
    <workflow>\n1. name [trigger]: instructions\n...</workflow>   add_workflow_step
    <step_names>understand, act, verify</step_names>             add_workflow_step
    <evidence>\n- turn 1, instance_state_mismatch; wrong value for `place_order.amount`; ...\n</evidence>
    <teacher>\n- task 1: `cd`(folder); `mv`(source, destination)\n</teacher>   teacher_gap
    <tools>\n- `place_order`: description | args: amount (required): ...\n</tools>
    then a plain-text instruction naming the reply format.

Evidence lines name tools as `tool` and tool/argument pairs as `tool.arg`; they never carry a
task's values (see ``rule_miner.summarise``), and teacher calls keep only argument names. Replies:
the full new section text between ``<section>`` and ``</section>``, or one step as JSON
``{"name", "instructions", "trigger"}`` between ``<step>`` and ``</step>``. Replies are parsed
as text, never executed. The request's ``seed`` is drawn from the mutator's rng, so the same round
asks the same question; ``user`` is ``task_id=mutator/<mutator>`` on routes that opt in.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.route import ModelParams, RouteSettings, check_route_settings
from evoharness.compiler.runtime.cache import open_cache
from evoharness.compiler.runtime.llm import drain_litellm_logging
from evoharness.compiler.runtime.models import ModelClient, check_model
from evoharness.compiler.schema import STEP_TRIGGERS
from evoharness.search.mutators.base import (
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    pick_section,
    positive_int,
    proposal,
    register_mutator,
    section_text,
)
from evoharness.search.mutators.rule_miner import call_args, summarise

log = logging.getLogger(__name__)
SYSTEM = ("You improve the harness (system prompt and workflow) of a tool-calling agent from evidence of its failures. "
          "Keep what works, add precise rules that name the tool and argument involved, and reply only in the requested format.")
MAX_SECTION_CHARS = 8000
_STEP_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def block(tag: str, body: str) -> str:
    return f"<{tag}>\n{body.strip()}\n</{tag}>"


def ask(route: str, task: str, prompt: str, rng: random.Random, *, settings: RouteSettings | None = None,
        cache_dir: str | None = None, on_cost: Callable[[str, float | None], None] | None = None) -> str:
    """One chat request through the harness's model client (timeout, retries, price, response
    cache: a resumed search does not pay for the same question twice); a route failure raises
    (the search logs it and goes on)."""
    user, seed = f"task_id=mutator/{task}", rng.randrange(2**31)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    client = ModelClient(ModelParams(route=route, temperature=0.0), settings or RouteSettings(),
                         cache=open_cache(cache_dir) if cache_dir else None)
    async def once() -> str:
        async with client:
            reply = await client.complete(messages, tools=[], user=user, seed=seed)
        await drain_litellm_logging()
        if on_cost is not None and not reply.cached:  # a cached answer was paid for once, in an earlier run
            on_cost(task, reply.cost_usd)
        return str(reply.content or "")

    return asyncio.run(once())


def tagged(text: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return m.group(1).strip() if m else None


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def check_section(original: str, new: str | None) -> str | None:
    """Why a proposed section is rejected, or None when it is acceptable."""
    if new is None:
        return "the reply has no <section>...</section> block"
    if not new.strip():
        return "the new section is empty"
    if new.strip() == original.strip():
        return "the new section is unchanged"
    if len(new) < 0.8 * len(original) and not all(s in " ".join(new.split()) for s in sentences(original)):
        return f"the new section guts the original ({len(new)} < 0.8 x {len(original)} chars and original sentences are missing)"
    if len(new) > max(MAX_SECTION_CHARS, 4 * len(original)):
        return f"the new section is too long ({len(new)} chars)"
    added = set(_TEMPLATE.findall(new)) - set(_TEMPLATE.findall(original))
    if added or "{{" in _TEMPLATE.sub("", new) or "{%" in _TEMPLATE.sub("", new):
        return f"the new section adds template markup {sorted(added)[:3]}; sections are Jinja2 templates"
    try:
        ImmutableSandboxedEnvironment().parse(new)
    except jinja2.TemplateSyntaxError as exc:
        return f"the new section is not a valid template ({exc.message})"
    return None


def tools_block(ctx: MutationContext, lines: Sequence[str]) -> str:
    """Documentation of the tools the evidence names, so a real model can write precise rules."""
    named = [t for t in ctx.tools if any(f"`{t}`" in ln or f"`{t}." in ln for ln in lines)]
    out = []
    for name in named[:8]:
        spec = ctx.tools[name]
        args = "; ".join(f"{a}{' (required)' if a in spec.required() else ''}: {' '.join(str((p or {}).get('description') or '').split())}"
                         for a, p in spec.properties().items())
        out.append(f"- `{name}`: {' '.join(spec.description.split())[:300]} | args: {args or 'none'}")
    return block("tools", "\n".join(out) or "(none)")


def _section_request(task: str, name: str, current: str, evidence: list[str], extra: str, tools: str, what: str) -> str:
    return "\n".join([
        block("task", task), block("section_name", name), block("current", current), block("evidence", "\n".join(evidence)),
        *([extra] if extra else []), tools,
        f"{what} Keep every instruction of the current section. Reply with the complete new section text between <section> and </section>.",
    ])


def _section_proposal(name: str, section: str, current: str, reply: str, note: str) -> list[Proposal]:
    new = tagged(reply, "section")
    reason = check_section(current, new)
    if reason is not None or new is None:
        log.warning("%s proposed nothing for section %r: %s", name, section, reason)
        return []
    return [proposal("section", section, new, name, note)]


def _llm_route(name: str, route: str, max_evidence: int, *, api_base: str | None, api_key_env: str | None,
               send_episode_id: bool, free: bool, input_cost_per_token: float | None,
               output_cost_per_token: float | None, send_seed: bool = True) -> RouteSettings:
    """The route is served, its endpoint is a URL, its key is set and its price is a price: checked
    when the search's settings are built, before round 0 is paid for, rather than failing on the
    first call after it. The route's settings, as a model config would give them."""
    if not isinstance(route, str) or "/" not in route:
        raise ConfigError("params.route", f"{name} needs a litellm model string, got {route!r}",
                          "use e.g. sim/medium or openai/gpt-4o-mini")
    positive_int(name, "max_evidence", max_evidence)
    for key, value in (("send_episode_id", send_episode_id), ("free", free), ("send_seed", send_seed)):
        if not isinstance(value, bool):
            raise ConfigError(f"params.{key}", f"{name} got {value!r}, not true or false", f"set params.{key}: true or false")
    try:
        check_route_settings({"route": route, "api_base": api_base, "input_cost_per_token": input_cost_per_token,
                              "output_cost_per_token": output_cost_per_token})
        check_model("params", route=route, params={}, api_key_env=api_key_env, api_base=api_base)
    except ConfigError as exc:
        raise ConfigError(exc.path.replace("model.", "params.", 1), exc.problem, exc.fix) from None
    return RouteSettings(api_base=api_base, api_key_env=api_key_env, retries=2, backoff_s=0.5, send_episode_id=send_episode_id,
                         free=free, input_cost_per_token=input_cost_per_token, output_cost_per_token=output_cost_per_token,
                         send_seed=send_seed)


@register_mutator("llm_prompt_rewriter")
def llm_prompt_rewriter(*, route: str = "sim/medium", section: str | None = None, max_evidence: int = 8,
                        api_base: str | None = None, api_key_env: str | None = None,
                        send_episode_id: bool = False, free: bool = False, input_cost_per_token: float | None = None,
                        output_cost_per_token: float | None = None, send_seed: bool = True) -> Mutator:
    """The route rewrites one section against the failure evidence; a reply that empties or guts
    the section (shorter than 0.8x without every original sentence) is rejected."""
    settings = _llm_route("llm_prompt_rewriter", route, max_evidence, api_base=api_base, api_key_env=api_key_env,
                          send_episode_id=send_episode_id, free=free, input_cost_per_token=input_cost_per_token,
                          output_cost_per_token=output_cost_per_token, send_seed=send_seed)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        name = pick_section(ctx, "llm_prompt_rewriter", section, "rules")
        lines = summarise(ctx.evidence, limit=max_evidence, tools=ctx.tools)
        if name is None or not lines:  # nothing failed: nothing to answer, and no call to pay for
            return []
        current = section_text(ctx, name)
        prompt = _section_request("rewrite_section", name, current, lines, "", tools_block(ctx, lines),
                                  "Rewrite the section so that the agent avoids these failures.")
        return _section_proposal("llm_prompt_rewriter", name, current,
                                 ask(route, "llm_prompt_rewriter", prompt, rng, settings=settings, cache_dir=ctx.cache_dir,
                                     on_cost=ctx.on_cost),
                                 f"{route} rewrite from {len(lines)} evidence line(s)")

    return FunctionMutator("llm_prompt_rewriter", propose)


def check_step(reply: str, taken: Sequence[str]) -> dict[str, Any] | str:
    """The step a reply proposes, or why it is rejected."""
    raw = tagged(reply, "step")
    if raw is None:
        return "the reply has no <step>...</step> block"
    try:
        step = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"the step is not JSON ({exc.msg})"
    if not isinstance(step, Mapping):
        return f"the step is not a JSON object: {raw[:80]!r}"
    name, instructions, trigger = step.get("name"), step.get("instructions"), step.get("trigger", "prompt")
    if not isinstance(name, str) or not _STEP_NAME.fullmatch(name):
        return f"step name {name!r} is not snake_case (a-z, 0-9, _; at most 40 chars)"
    if name in taken:
        return f"step name {name!r} is taken ({', '.join(taken)})"
    if not isinstance(instructions, str) or not instructions.strip() or len(instructions) > 1000:
        return "step instructions must be a non-empty string of at most 1000 chars"
    if _TEMPLATE.search(instructions) or "{{" in instructions or "{%" in instructions:
        return "step instructions contain template markup"
    if trigger not in STEP_TRIGGERS:
        return f"step trigger {trigger!r} is not one of {list(STEP_TRIGGERS)}"
    return {"name": name, "instructions": " ".join(instructions.split()), "trigger": trigger}


@register_mutator("llm_workflow_editor")
def llm_workflow_editor(*, route: str = "sim/medium", section: str | None = None, max_evidence: int = 8,
                        api_base: str | None = None, api_key_env: str | None = None,
                        send_episode_id: bool = False, free: bool = False, input_cost_per_token: float | None = None,
                        output_cost_per_token: float | None = None, send_seed: bool = True) -> Mutator:
    """The route proposes one new optional workflow step (unique name, trigger prompt or
    before_final), placed after the last step. ``section`` is unused (kept for a uniform config)."""
    settings = _llm_route("llm_workflow_editor", route, max_evidence, api_base=api_base, api_key_env=api_key_env,
                          send_episode_id=send_episode_id, free=free, input_cost_per_token=input_cost_per_token,
                          output_cost_per_token=output_cost_per_token, send_seed=send_seed)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        lines = summarise(ctx.evidence, limit=max_evidence, tools=ctx.tools)
        if not lines:
            return []
        workflow = [dict(s) for s in ctx.agent.get("workflow", [])]
        taken = [str(s["name"]) for s in workflow] + [n for n in ctx.pools.steps if n not in {s["name"] for s in workflow}]
        listing = [f"{i}. {s['name']} [{s.get('trigger', 'prompt')}{', optional' if s.get('optional') else ''}]: "
                   f"{' '.join(str(s['instructions']).split())}"
                   for i, s in enumerate(workflow + [dict(e.value) for n, e in ctx.pools.steps.items()
                                                     if n not in {w['name'] for w in workflow}], 1)]
        prompt = "\n".join([
            block("task", "add_workflow_step"), block("workflow", "\n".join(listing) or "(no steps)"),
            block("step_names", ", ".join(taken)), block("evidence", "\n".join(lines)), tools_block(ctx, lines),
            'Propose one new workflow step that would prevent these failures. Reply with JSON {"name": "snake_case_name", '
            '"instructions": "...", "trigger": "prompt" or "before_final"} between <step> and </step>.',
        ])
        reply = ask(route, "llm_workflow_editor", prompt, rng, settings=settings, cache_dir=ctx.cache_dir, on_cost=ctx.on_cost)
        result = check_step(reply, taken)
        if isinstance(result, str):
            log.warning("llm_workflow_editor proposed nothing: %s", result)
            return []
        value = {**result, "after": [str(workflow[-1]["name"])] if workflow else [], "optional": True}
        return [proposal("step", result["name"], value, "llm_workflow_editor", f"{route} step ({result['trigger']})")]

    return FunctionMutator("llm_workflow_editor", propose)


def redact_call(line: str) -> str:
    """A teacher call line reduced to `tool`(arg, ...): the teacher's values are likely the gold ones."""
    text = line.strip()
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)", text)
    if not m:
        return ""
    rest = text[m.end():].strip()
    args = call_args(text) if rest.startswith("(") else tuple(re.findall(r"--([A-Za-z_][A-Za-z0-9_]*)", rest))
    return f"`{m.group(1)}`({', '.join(args)})"


@register_mutator("teacher_gap_rewriter")
def teacher_gap_rewriter(*, route: str = "sim/medium", section: str | None = None, max_evidence: int = 8, max_tasks: int = 3,
                         api_base: str | None = None, api_key_env: str | None = None,
                         send_episode_id: bool = False, free: bool = False, input_cost_per_token: float | None = None,
                        output_cost_per_token: float | None = None, send_seed: bool = True) -> Mutator:
    """Runs the teacher (ctx.run_teacher) on up to ``max_tasks`` failing tasks and asks the route
    for a section that closes the gap between the student's failures and the teacher's calls.
    Proposes nothing without a teacher."""
    settings = _llm_route("teacher_gap_rewriter", route, max_evidence, api_base=api_base, api_key_env=api_key_env,
                          send_episode_id=send_episode_id, free=free, input_cost_per_token=input_cost_per_token,
                          output_cost_per_token=output_cost_per_token, send_seed=send_seed)
    positive_int("teacher_gap_rewriter", "max_tasks", max_tasks)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        name = pick_section(ctx, "teacher_gap_rewriter", section, "rules")
        task_ids = list(dict.fromkeys(e.task_id for e in ctx.evidence))[:max_tasks]
        if ctx.run_teacher is None or name is None or not task_ids:
            return []
        calls = ctx.run_teacher(task_ids)
        teacher = [f"- task {i}: " + "; ".join(c for c in (redact_call(x) for x in calls.get(t, ())) if c)
                   for i, t in enumerate(task_ids, 1)]
        teacher = [t for t in teacher if not t.endswith(": ")]
        chosen = set(task_ids)
        lines = summarise([e for e in ctx.evidence if e.task_id in chosen], limit=max_evidence, tools=ctx.tools)
        if not teacher:
            log.warning("teacher_gap_rewriter proposed nothing: the teacher made no calls on %s", task_ids)
            return []
        current = section_text(ctx, name)
        prompt = _section_request("teacher_gap", name, current, lines, block("teacher", "\n".join(teacher)),
                                  tools_block(ctx, lines + teacher),
                                  "A stronger model (the teacher) solved these tasks with the calls shown. Add rules that make the agent "
                                  "call the tools the way the teacher did, where the student failed.")
        return _section_proposal("teacher_gap_rewriter", name, current,
                                 ask(route, "teacher_gap_rewriter", prompt, rng, settings=settings, cache_dir=ctx.cache_dir,
                                     on_cost=ctx.on_cost),
                                 f"{route} teacher-gap rewrite on {len(teacher)} task(s)")

    return FunctionMutator("teacher_gap_rewriter", propose)
