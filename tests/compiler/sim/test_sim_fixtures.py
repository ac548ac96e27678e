"""Shared fakes for the simulator tests: a two-turn file-system task and a prompt builder.

Kept independent of the BFCL workload so unit tests run without it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.sim.gold import StaticGoldSource
from evoharness.compiler.sim.surface import DOCUMENTED, Surface
from evoharness.compiler.toolspec import ToolSpec
from tests.compiler.sim.sim_selfplay import EpisodeLog, openai_tools, play_episode, render_system_prompt

TOOL_DESC = "A file system tool that does exactly what its name says, in the current directory."
ARG_DESC = "The exact name of the file or folder to use."


def spec(name: str, args: tuple[str, ...], mutates: bool, *, desc: str = TOOL_DESC,
         arg_desc: str = ARG_DESC, group: str = "fs") -> ToolSpec:
    props = {a: {"type": "string", "description": arg_desc} if arg_desc else {"type": "string"}
             for a in args}
    return ToolSpec(name, desc, {"type": "object", "properties": props, "required": list(args)},
                    mutates_state=mutates, group=group)


SPECS = (
    spec("ls", (), False), spec("cd", ("folder",), True), spec("mkdir", ("dir_name",), True),
    spec("mv", ("source", "destination"), True), spec("cp", ("source", "destination"), True),
    spec("grep", ("file_name", "pattern"), False), spec("cat", ("file_name",), False),
)
TURN_TEXTS = ("Move the report into a new temp folder.", "Find 'budget' in it.",
              "Now book me a flight to Mars.")
TASK = Task(
    task_id="fake/files_0",
    split="train",
    turns=tuple(({"role": "user", "content": t},) for t in TURN_TEXTS),
    tool_names=tuple(s.name for s in SPECS),
    gold=(
        (ToolCall("ls", {}), ToolCall("cd", {"folder": "document"}),
         ToolCall("mkdir", {"dir_name": "temp"}),
         ToolCall("mv", {"source": "final_report.pdf", "destination": "temp"})),
        (ToolCall("cd", {"folder": "temp"}),
         ToolCall("grep", {"file_name": "final_report.pdf", "pattern": "budget"})),
        (),
    ),
)
GOLD = StaticGoldSource([TASK], SPECS)
MUTATES = {s.name: s.mutates_state for s in SPECS}
USER = "task_id=fake/files_0"


def fake_env(name: str, args: Mapping[str, Any]) -> str:
    """Results that mention some gold values, so propagation can happen."""
    if name == "ls":
        return "document archive"
    if name == "cd" and args.get("folder") not in ("document", "temp"):
        raise ValueError(f"no such folder {args.get('folder')!r}")
    return f"ok: {name}"


def prompt(fmt: str = "json", *, sections: tuple[tuple[str, str], ...] = (("Role", "You manage files."),),
           procedure: tuple[tuple[str, str], ...] = (), specs: tuple[ToolSpec, ...] = SPECS) -> str:
    return render_system_prompt(sections, specs, fmt, procedure)


def play(model: str = "sim/small", fmt: str = "json", *, temperature: float = 1.0,
         sample: int = 0, world: int = 0, specs: tuple[ToolSpec, ...] = SPECS,
         sections: tuple[tuple[str, str], ...] = (("Role", "You manage files."),),
         procedure: tuple[tuple[str, str], ...] = (), shared_draws: bool = True, surface: Surface = DOCUMENTED,
         step: str | None = None) -> EpisodeLog:
    # shared by default here: these tests pin one mechanism at a time, and shared draws keep the
    # rest of the episode fixed while one cue changes
    return play_episode(
        model, TASK, GOLD, fake_env,
        system_prompt=prompt(fmt, sections=sections, procedure=procedure, specs=specs),
        tools=openai_tools(specs) if fmt != "bash" else None,
        temperature=temperature, world=world, sample=sample, shared_draws=shared_draws, surface=surface, step=step)


def passed(log: EpisodeLog) -> bool:
    from tests.compiler.sim.sim_selfplay import matches_gold

    return matches_gold(log, TASK, MUTATES)


def start() -> list[dict]:
    return [{"role": "system", "content": prompt()}, {"role": "user", "content": TURN_TEXTS[0]}]


async def converse(lm: Any, model: str, max_steps: int = 30, **kw: Any) -> list:
    """Play every turn of TASK through litellm, feeding tool results back; returns each reply."""
    messages, replies = start(), []
    turns = list(TURN_TEXTS[1:])
    for _ in range(max_steps):
        r = await lm.acompletion(model=model, messages=messages, tools=openai_tools(SPECS), temperature=1.0,
                                 user=USER, **kw)
        msg = r.choices[0].message
        calls = msg.tool_calls or []
        replies.append((msg.content or "", [(c.function.name, c.function.arguments) for c in calls],
                        r.choices[0].finish_reason, r.usage.prompt_tokens, r.usage.completion_tokens))
        messages.append({"role": "assistant", "content": msg.content or "", **({"tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls]} if calls else {})})
        for c in calls:
            try:
                out = fake_env(c.function.name, json.loads(c.function.arguments))
            except ValueError as exc:
                out = f"Error: {exc}"
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
        if not calls:
            if not turns:
                break
            messages.append({"role": "user", "content": turns.pop(0)})
    return replies
