"""Reading a chat request the way the harness writes it (conventions in docs/sim-model.md).

Pure: messages in, classified events out. The user string ``task_id=<workload>/<id>`` is the only
side channel (the task's gold calls are the simulator's to look up) and is parsed here too; which
sample this is reaches the simulator only as a provider gets it, through the request's ``seed``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

EventKind = Literal["system", "user", "assistant", "tool_results", "workflow_step", "feedback"]

_RESULT_BLOCK = re.compile(r'<tool_result name="(?P<name>[^"]*)">\n?(?P<body>.*?)\n?</tool_result>',
                           re.DOTALL)
_STEP = re.compile(r'^\s*<workflow_step name="(?P<name>[^"]*)">')
FAULT_MARKER = "[output truncated]"


class SimRequestError(ValueError):
    """The request cannot be simulated (bad user string, unknown task); a 400, never retried."""


@dataclass(frozen=True)
class RequestMeta:
    task_id: str
    attempt: int | None = None  # optional explicit retry counter for fault injection

    @property
    def workload(self) -> str:
        return self.task_id.split("/", 1)[0]


def parse_user(user: str | None) -> RequestMeta:
    fields: dict[str, str] = {}
    for part in (user or "").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    fix = ("send user='task_id=<workload>/<id>' with every sim request (model.send_episode_id: true, "
           "as the sim_* model configs set)")
    if "/" not in fields.get("task_id", ""):
        raise SimRequestError(f"simulated model got user={user!r} without a task_id; {fix}")
    if "sample" in fields or "seed" in fields:  # an older client's format: its samples would silently be one draw
        raise SimRequestError(f"simulated model got user={user!r}, which names a sample or seed; send user='task_id=<workload>/<id>' "
                              "and the sample as the request's seed parameter (every sample its own seed)")
    try:
        return RequestMeta(task_id=fields["task_id"], attempt=int(fields["attempt"]) if "attempt" in fields else None)
    except ValueError as exc:
        raise SimRequestError(f"simulated model got user={user!r} with a non-integer field; {fix}") from exc


@dataclass(frozen=True)
class ObservedCall:
    name: str
    arguments: Any  # decoded JSON object, or the raw string when it does not decode


@dataclass(frozen=True)
class Event:
    kind: EventKind
    text: str = ""
    calls: tuple[ObservedCall, ...] = ()  # assistant native tool calls
    results: tuple[str, ...] = ()  # tool_results: each result's content
    step: str = ""  # workflow_step name

    @property
    def has_error_result(self) -> bool:
        return self.kind == "feedback" or any(is_error_result(r) for r in self.results)

    @property
    def is_fault(self) -> bool:
        """A malformed-output fault the simulator injected (never one of its own decisions)."""
        if self.kind != "assistant":
            return False
        return self.text.rstrip().endswith(FAULT_MARKER) or any(
            isinstance(c.arguments, str) for c in self.calls
        )


def is_error_result(result: str) -> bool:
    """The harness's "Error: ..." convention, or a tool that reports failure as {"error": ...}."""
    text = result.lstrip()
    if text.startswith("Error"):
        return True
    if not text.startswith("{"):
        return False
    try:
        decoded = json.loads(text)
    except ValueError:
        return False
    return isinstance(decoded, dict) and "error" in decoded


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def _decode(arguments: Any) -> Any:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return str(arguments)
    return value if isinstance(value, dict) else str(arguments)


def classify(message: Mapping[str, Any]) -> Event:
    role = message.get("role")
    text = content_text(message.get("content"))
    if role in ("system", "developer"):
        return Event("system", text)
    if role == "assistant":
        calls = tuple(
            ObservedCall(str((c.get("function") or {}).get("name", "")),
                         _decode((c.get("function") or {}).get("arguments")))
            for c in (message.get("tool_calls") or ())
        )
        return Event("assistant", text, calls)
    if role in ("tool", "function"):
        return Event("tool_results", results=(text,))
    step = _STEP.match(text)
    if step:
        return Event("workflow_step", text, step=step.group("name"))
    blocks = _RESULT_BLOCK.findall(text)
    if blocks:
        return Event("tool_results", results=tuple(body for _, body in blocks))
    if text.lstrip().startswith("Error"):
        return Event("feedback", text)
    return Event("user", text)


@dataclass(frozen=True)
class Conversation:
    system_prompt: str
    turn: int
    earlier: tuple[Event, ...]  # everything before the current turn's user message(s)
    current: tuple[Event, ...]  # events after the current turn's last user message


def split_conversation(
    messages: Sequence[Mapping[str, Any]], turn_texts: Sequence[Sequence[str]] = ()
) -> Conversation:
    """Find the current turn. When the task's user texts are known, a user message is matched to
    its turn (consecutive user messages share a turn; a repeated text goes to the next turn that
    has it; an unmatched user message is harness feedback); otherwise turn = user messages - 1."""
    events = [classify(m) for m in messages]
    system = "\n\n".join(e.text for e in events if e.kind == "system")
    known: dict[str, list[int]] = {}
    for i, texts in enumerate(turn_texts):
        for t in texts:
            known.setdefault(t.strip(), []).append(i)
    matching = any(e.kind == "user" and e.text.strip() in known for e in events)
    turn, start, previous = -1, len(events), ""
    for i, event in enumerate(events):
        if event.kind == "system":
            continue
        if event.kind == "user" and matching:
            candidates = known.get(event.text.strip())
            if candidates is None:
                events[i] = Event("feedback", event.text)
            else:
                floor = turn if previous == "user" else turn + 1
                turn = next((c for c in candidates if c >= floor), candidates[-1])
                start = i + 1
        elif event.kind == "user":
            turn, start = turn + 1, i + 1
        previous = events[i].kind
    turn = max(turn, 0)
    body = [e for e in events if e.kind != "system"]
    cut = sum(1 for e in events[:start] if e.kind != "system")
    return Conversation(system, turn, tuple(body[:cut]), tuple(body[cut:]))
