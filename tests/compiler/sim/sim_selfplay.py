"""A reference agent loop around the simulator, in-process and without litellm.

It follows the message conventions the simulator reads (docs/sim-model.md) and exists for tests,
calibration and enumerating the simulator's response surface; the product's agent loop lives
elsewhere. ``render_system_prompt`` is likewise a stand-in for the compiler's templates.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.sim.engine import SimRequest, SimResult, simulate
from evoharness.compiler.sim.features import extract_features
from evoharness.compiler.sim.gold import GoldSource
from evoharness.compiler.sim.surface import DOCUMENTED, Surface
from evoharness.compiler.toolspec import ToolSpec

ToolFn = Callable[[str, Mapping[str, Any]], str]  # raises on tool failure
_BLOCK = re.compile(r"```tool\n(.*?)```", re.DOTALL)


def render_system_prompt(sections: Sequence[tuple[str, str]], tools: Sequence[ToolSpec],
                         tool_format: str, procedure: Sequence[tuple[str, str]] = ()) -> str:
    parts = [f"## {title}\n{body}" for title, body in sections]
    if procedure:
        parts.append("## Procedure\n" + "\n".join(
            f"{i + 1}. {name}: {text}" for i, (name, text) in enumerate(procedure)))
    rules = [f"- {t.name}: {r}" for t in tools for r in t.rules]
    if rules:
        parts.append("## Tool rules\n" + "\n".join(rules))
    if tool_format in ("bash", "both"):
        blocks = ["Call tools inside a ```tool block, one call per line: name --arg value."]
        for t in tools:
            lines = [f"### {t.name}", t.description]
            for arg, spec in t.properties().items():
                req = " (required)" if arg in t.required() else ""
                lines.append(f"{t.name} --{arg} <{spec.get('type', 'string')}>  "
                             f"{spec.get('description', '')}{req}".rstrip())
            lines += [f"Example: {e}" for e in t.examples]
            blocks.append("\n".join(lines))
        parts.append("## Tools\n" + "\n\n".join(blocks))
    return "\n\n".join(parts)


def openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    # examples ride in the description, as the compiler renders them for native tools
    return [{"type": "function", "function": {
        "name": t.name, "description": t.description + "".join(f"\nExample: {e}" for e in t.examples),
        "parameters": dict(t.parameters)}} for t in tools]


def parse_bash(text: str) -> tuple[list[ToolCall], str | None]:
    calls: list[ToolCall] = []
    for block in _BLOCK.findall(text):
        for line in filter(None, (ln.strip() for ln in block.splitlines())):
            try:
                words = shlex.split(line)
            except ValueError as exc:
                return calls, f"Error: could not parse tool call {line!r}: {exc}"
            args: dict[str, Any] = {}
            for key, value in zip(words[1::2], words[2::2]):
                try:
                    args[key.lstrip("-")] = json.loads(value)
                except ValueError:
                    args[key.lstrip("-")] = value
            calls.append(ToolCall(words[0], args))
    return calls, None


@dataclass
class EpisodeLog:
    calls: list[list[tuple[ToolCall, bool]]] = field(default_factory=list)  # per turn: (call, ok)
    results: list[SimResult] = field(default_factory=list)  # every model call
    parse_errors: int = 0

    @property
    def model_calls(self) -> int:
        return len(self.results)

    def cost(self) -> float:
        return sum(r.prompt_tokens * r.tier.input_cost_per_token
                   + r.completion_tokens * r.tier.output_cost_per_token for r in self.results)


def play_episode(model: str | Callable[[list[dict[str, Any]]], str], task: Task, gold: GoldSource, tool_fn: ToolFn, *,
                 system_prompt: str, tools: Sequence[Mapping[str, Any]] | None,
                 temperature: float = 0.0, world: int = 0, sample: int = 0,
                 max_steps: int = 20, shared_draws: bool = False, surface: Surface = DOCUMENTED,
                 step: str | None = None) -> EpisodeLog:
    """``step``: the procedure step the harness sends before the final answer (default: the
    first verify-type step, as the documented surface reads it). ``model`` may be a function of
    the conversation so far: the route each request goes to (a harness handing a turn over)."""
    features = extract_features(system_prompt, tools, temperature)
    verify = (features.step(step) if step is not None
              else next((s for s in features.procedure if s.is_verify), None))
    native = features.tool_format != "bash"
    # the sample reaches the simulator as a provider gets it, through the request's seed; ``world``
    # is SimConfig.world (a replicate at temperature 0, where no request field matters)
    user = f"task_id={task.task_id}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    log = EpisodeLog()
    for turn in task.turns:
        messages += [dict(m) for m in turn]
        log.calls.append([])
        verified = verify is None
        for _ in range(max_steps):
            route = model(messages) if callable(model) else model
            result = simulate(SimRequest(route, messages, tools if native else None,
                                         temperature, user, seed=sample), gold, shared_draws=shared_draws, world=world,
                              surface=surface)
            log.results.append(result)
            r = result.rendered
            message: dict[str, Any] = {"role": "assistant", "content": r.content}
            if r.tool_calls:
                message["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.arguments}} for c in r.tool_calls]
            messages.append(message)
            if native and r.tool_calls:
                for c in r.tool_calls:
                    out = _run(tool_fn, log, c.name, json.loads(c.arguments))
                    messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
                continue
            calls, error = parse_bash(r.content or "") if not native else ([], None)
            if error:
                log.parse_errors += 1
                messages.append({"role": "user", "content": error})
                continue
            if calls:
                blocks = [f'<tool_result name="{c.name}">\n{_run(tool_fn, log, c.name, c.arguments)}'
                          f"\n</tool_result>" for c in calls]
                messages.append({"role": "user", "content": "\n".join(blocks)})
                continue
            if not verified and verify is not None:
                verified = True
                messages.append({"role": "user", "content":
                                 f'<workflow_step name="{verify.name}">\n{verify.instructions}'
                                 "\n</workflow_step>"})
                continue
            break
    return log


def _run(tool_fn: ToolFn, log: EpisodeLog, name: str, args: Mapping[str, Any]) -> str:
    try:
        out = tool_fn(name, args)
    except Exception as exc:  # the tool's failure is data for the model, as in the real loop
        log.calls[-1].append((ToolCall(name, dict(args)), False))
        return f"Error: {exc}"
    log.calls[-1].append((ToolCall(name, dict(args)), True))
    return out


def matches_gold(log: EpisodeLog, task: Task, mutates: Mapping[str, bool]) -> bool:
    """A proxy scorer: every turn made all its gold calls and no successful non-gold write."""
    for turn, gold in enumerate(task.gold):
        made = [(c.name, json.dumps(dict(c.arguments), sort_keys=True))
                for c, ok in (log.calls[turn] if turn < len(log.calls) else []) if ok]
        want = [(g.name, json.dumps(dict(g.arguments), sort_keys=True)) for g in gold]
        if any(w not in made for w in want):
            return False
        if any(m not in want and mutates.get(m[0], False) for m in made):
            return False
    return True
