"""Turning a decision into the assistant message a real model would send.

json/both: native ``tool_calls`` (arguments as a JSON string). bash: a ```tool fenced block with
one ``name --arg value`` line, shell-quoted. Final answers are plain text whose length follows
the prompt's style cues; that length is what moves completion tokens and so cost.
"""
from __future__ import annotations

import json
import random
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.sim.conversation import FAULT_MARKER
from evoharness.compiler.sim.policy import Action

FENCE = "```tool"


@dataclass(frozen=True)
class RenderedCall:
    id: str
    name: str
    arguments: str  # JSON


@dataclass(frozen=True)
class Rendered:
    content: str | None
    tool_calls: tuple[RenderedCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    def completion_text(self) -> str:
        """What the model 'generated', for completion-token counting."""
        calls = "".join(f"{c.name}({c.arguments})" for c in self.tool_calls)
        return (self.content or "") + calls


def bash_value(value: Any) -> str:
    """Strings verbatim, everything else as a JSON literal (the harness types values by the
    tool's schema), then shell-quoted for the harness's shlex."""
    return shlex.quote(value if isinstance(value, str) else json.dumps(value))


def bash_line(name: str, arguments: Mapping[str, Any]) -> str:
    # --key=value keeps a value that itself starts with "--" from reading as the next flag
    return " ".join([name] + [f"--{k}={bash_value(v)}" if str(v).startswith("--") else
                              f"--{k} {bash_value(v)}" for k, v in arguments.items()])


def _broken_quoting(line: str) -> str:
    """The line with an unterminated quote, so the harness's shlex.split rejects it."""
    head, sep, rest = line.partition(" --")
    opened = rest.replace(" ", " '", 1)
    broken = f"{head} --{opened}" if sep and " " in rest else line + " '"
    try:
        shlex.split(broken)
    except ValueError:
        return broken
    return broken + " '"


_PREFACES = ("I'll call {tool} for this step.", "Next, {tool}.", "Running {tool} now.")


def render_call(action: Action, tool_format: str, call_id: str, style: int,
                rnd: random.Random) -> Rendered:
    preface = rnd.choice(_PREFACES).format(tool=action.tool) if style > 0 else ""
    if tool_format != "bash":
        call = RenderedCall(call_id, action.tool, json.dumps(dict(action.arguments)))
        return Rendered(preface or None, (call,))
    line = bash_line(action.tool, action.arguments)
    if action.error == "missing_fence":
        block = line
    elif action.error == "malformed_quote":
        block = f"{FENCE}\n{_broken_quoting(line)}\n```"
    else:
        block = f"{FENCE}\n{line}\n```"
    return Rendered(f"{preface}\n{block}".strip())


_OPEN = ("Done.", "All set.", "Finished.", "Completed.")
_BODY = (
    "I handled the request using {tools}.",
    "The request is complete; the tools used were {tools}.",
    "I worked through the request with {tools}.",
)
_DETAIL = (
    "Each step was taken in order, and every tool result was checked before moving on.",
    "I confirmed the inputs against the earlier results so that the names and values match.",
    "Where a step depended on an earlier output, I reused that output exactly as returned.",
    "Nothing else in the environment was changed beyond what the request asked for.",
    "If you want, I can undo any of these changes or continue with a follow-up task.",
    "The steps above are listed in the order they were executed, with their arguments.",
)


def render_final(action: Action, style: int, turn_tools: Sequence[str], last_result: str,
                 rnd: random.Random, *, answer: str | None = None) -> Rendered:
    if answer and action.reason in ("done", "empty_turn"):  # a turn that ends as it should gives the reference answer, verbatim
        return Rendered(answer)
    tools = ", ".join(dict.fromkeys(turn_tools)) or "no tools"
    if action.reason in ("no_tool", "empty_turn"):
        opener = "I can't complete that with the tools and information available."
    else:
        opener = rnd.choice(_OPEN)
    if style < 0:
        return Rendered(f"{opener} ({tools})")
    snippet = " ".join(last_result.split()[:25])
    parts = [opener, rnd.choice(_BODY).format(tools=tools)]
    if snippet:
        parts.append(f"Latest result: {snippet}")
    if style > 0:
        parts += [f"Step {i + 1}: I called {t} and used its result in the next step."
                  for i, t in enumerate(turn_tools)]
        parts += rnd.sample(_DETAIL, k=len(_DETAIL))
        parts.append("In short: " + rnd.choice(_BODY).format(tools=tools))
    else:
        parts.append(rnd.choice(_DETAIL))
    return Rendered(" ".join(parts))


def render_fault(normal: Rendered) -> Rendered:
    """A truncated generation: invalid JSON arguments, or text cut off mid-line."""
    if normal.tool_calls:
        calls = tuple(RenderedCall(c.id, c.name, c.arguments[: max(1, len(c.arguments) // 2)])
                      for c in normal.tool_calls)
        return Rendered(normal.content, calls)
    text = normal.content or ""
    return Rendered(f"{text[: len(text) // 2]} {FAULT_MARKER}")
