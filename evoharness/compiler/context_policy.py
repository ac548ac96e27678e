"""The context policy: what of a conversation the harness sends the model again on every call.

In a tool loop every model call re-sends the system prompt, the tools and the whole conversation,
tool results included, so one long result is paid for on every later call of the episode. A
policy clips a tool's results to a length: the head and the tail are kept and the cut is said in
its place, so the model knows that something was left out and how much. It can also keep only the
last few user turns' results as they came (a verbatim window) and compact older ones to
``MIN_CHARS``, the same way. And it can offer a turn only the tools it is likely to use (the tool
schemas are re-sent on every call, often the largest part of a request): the ``tools_per_turn``
whose names and descriptions share the most words with the turn's user messages, weighted by how
rare each word is among the tools, plus every tool the episode has called. Pure: the compiler
builds it from ``agent.context``, the runtime applies it, and the variant's hash covers it.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evoharness.compiler.errors import ConfigError

ANY_TOOL = "*"  # the clip length of every tool without one of its own
MIN_CHARS = 200  # below this a clip keeps too little of a result to act on
HEAD_SHARE = 2 / 3  # of the kept characters, the share from the result's start (the rest is its end)


def cut_marker(cut: int, limit: int, *, older: bool = False) -> str:
    """What stands in the sent result for the characters the policy cut (``older``: the result's
    turn left the verbatim window)."""
    whose = "results of earlier turns" if older else "results"
    return f"\n[... {cut} characters of this result not shown ({whose} are clipped to {limit} characters) ...]\n"


_CUT = re.compile(r"\n\[\.\.\. \d+ characters of this result not shown \((?:results|results of earlier turns) are clipped to \d+ "
                  r"characters\) \.\.\.\]\n")


# the start of a marker, matched without consuming anything after it: two markers a tool wrote back
# to back are both defused (a match that swallowed the newline between them would leave the second)
_MARKER_START = re.compile(r"\n\[\.\.\. (?=\d+ characters of this result not shown \()")


def defused(text: str) -> str:
    """A tool's own output with every marker's opening changed, so only a real cut reads as one."""
    return _MARKER_START.sub("\n[.. ", text)


def is_clipped(text: str) -> bool:
    """Whether a result as sent says that some of it was cut."""
    return _CUT.search(text) is not None


def clipped_parts(text: str) -> tuple[str, str] | None:
    """(the kept head, the kept tail) of a result as sent, or None when nothing of it was cut."""
    parts = _CUT.split(text, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else None


@dataclass(frozen=True)
class ContextPolicy:
    """How much of each tool's results the model is sent.

    Attributes:
        tool_result_chars: The longest result sent per tool name (``"*"``: every tool without its
            own); empty sends every result whole.
        keep_turns: The user turns whose results are sent as the clip left them: the current one
            and the ``keep_turns - 1`` before it; an older turn's results are compacted to
            ``MIN_CHARS``. None keeps every turn.
        tools_per_turn: The tools a turn is offered beyond those the episode has called (see
            ``turn_tools``); None offers every tool on every call.
    """

    tool_result_chars: Mapping[str, int] = field(default_factory=dict)
    keep_turns: int | None = None
    tools_per_turn: int | None = None

    def __bool__(self) -> bool:
        return bool(self.tool_result_chars) or self.keep_turns is not None or self.tools_per_turn is not None

    def turn_tools(self, offered: Sequence[str], docs: Mapping[str, str], said: str, called: Sequence[str]) -> list[str]:
        """The tools a turn is offered, in ``offered``'s order: every one ``called`` earlier in the
        episode, and the ``tools_per_turn`` others whose name and description (``docs``) share the
        most words with the turn's user messages (``said``), each shared word weighted by how rare
        it is among the offered tools' texts; ties go to the earlier tool. All of ``offered`` when
        the policy sets no number."""
        if self.tools_per_turn is None or len(offered) <= self.tools_per_turn:
            return list(offered)
        words = {name: _words(name + " " + docs.get(name, "")) for name in offered}
        rarity = {w: math.log(1 + len(offered) / sum(1 for ws in words.values() if w in ws)) for ws in words.values() for w in ws}
        asked = _words(said)
        score = {name: sum(rarity[w] for w in ws & asked) for name, ws in words.items()}
        rest = [n for n in offered if n not in called]
        picked = set(sorted(rest, key=lambda n: (-score[n], rest.index(n)))[:self.tools_per_turn]) | set(called)
        return [n for n in offered if n in picked]

    def limit(self, tool: str) -> int | None:
        return self.tool_result_chars.get(tool, self.tool_result_chars.get(ANY_TOOL))

    def clip(self, tool: str, text: str) -> tuple[str, int]:
        """(what the model is sent of ``tool``'s result ``text``, characters cut). A tool's own
        output that carries the marker's words has them defused, so only a real cut reads as one;
        a result that the marker would not shorten is sent whole."""
        text = defused(text)
        limit = self.limit(tool)
        if limit is None or len(text) <= limit + len(cut_marker(len(text) - limit, limit)):
            return text, 0
        return _cut(text, limit), len(text) - limit

    def compact(self, original: str, cut: int) -> tuple[str, int] | None:
        """(what the model is sent of a result whose turn left the verbatim window, the characters
        cut in all), or None when compacting would not shorten what was sent. ``original`` is the
        tool's whole result and ``cut`` what the clip already took from it."""
        original = defused(original)
        sent = len(original) if not cut else len(original) - cut + len(cut_marker(cut, len(original) - cut))
        if sent <= MIN_CHARS + len(cut_marker(len(original) - MIN_CHARS, MIN_CHARS, older=True)):
            return None
        return _cut(original, MIN_CHARS, older=True), len(original) - MIN_CHARS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_result_chars": dict(sorted(self.tool_result_chars.items()))}
        # each setting only when set: a clip alone keeps the hash it had before the others existed
        if self.keep_turns is not None:
            out["keep_turns"] = self.keep_turns
        if self.tools_per_turn is not None:
            out["tools_per_turn"] = self.tools_per_turn
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ContextPolicy:
        """A written policy, checked as a config's is (a stored variant is data, not trusted)."""
        chars = dict((data or {}).get("tool_result_chars") or {})
        for name, value in chars.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < MIN_CHARS:
                raise ValueError(f"context policy: {name!r} -> {value!r} is not a clip length of at least {MIN_CHARS} characters")
        keep, per_turn = (data or {}).get("keep_turns"), (data or {}).get("tools_per_turn")
        for key, value in (("keep_turns", keep), ("tools_per_turn", per_turn)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"context policy: {key}={value!r} is not a whole number, at least 1")
        return cls(tool_result_chars=chars, keep_turns=keep, tools_per_turn=per_turn)


def _words(text: str) -> set[str]:
    """The lowercase words of a text, names split at underscores and case changes (``getStockInfo``:
    get, stock, info), words of one or two letters left out."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if len(w) > 2}


def _cut(text: str, limit: int, *, older: bool = False) -> str:
    head = int(limit * HEAD_SHARE)
    tail = limit - head
    return text[:head] + cut_marker(len(text) - limit, limit, older=older) + (text[-tail:] if tail else "")


def context_policy(config: Mapping[str, Any] | None, *, tools: list[str]) -> ContextPolicy:
    """The policy ``agent.context`` describes, checked against the agent's tools."""
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError("agent.context", f"must be a mapping, got {config!r}", "write agent.context.tool_result_chars.<tool>: <chars>")
    config = dict(config or {})
    unknown = sorted(set(config) - {"tool_result_chars", "keep_turns", "tools_per_turn"})
    if unknown:
        raise ConfigError(f"agent.context.{unknown[0]}", "is not a context policy setting",
                          "use agent.context.tool_result_chars, keep_turns or tools_per_turn")
    keep, per_turn = config.get("keep_turns"), config.get("tools_per_turn")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ConfigError("agent.context.keep_turns", f"must be a whole number of user turns, at least 1; got {keep!r}",
                          "set it to 1 (only the current turn's results whole) or more, or null to keep every turn")
    if per_turn is not None and (isinstance(per_turn, bool) or not isinstance(per_turn, int) or per_turn < 1):
        raise ConfigError("agent.context.tools_per_turn", f"must be a whole number of tools, at least 1; got {per_turn!r}",
                          "set it to the tools a turn needs at most (e.g. 8), or null to offer every tool on every call")
    raw = config.get("tool_result_chars") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError("agent.context.tool_result_chars", f"must map tool names to lengths, got {raw!r}",
                          "write agent.context.tool_result_chars.<tool>: <chars>")
    chars = dict(raw)
    for name, value in chars.items():
        key = f"agent.context.tool_result_chars.{name}"
        if name != ANY_TOOL and name not in tools:
            raise ConfigError(key, f"names no tool the agent offers ({name!r})",
                              f"use one of the agent's tools or {ANY_TOOL!r} for every tool")
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_CHARS:
            raise ConfigError(key, f"must be a whole number of characters, at least {MIN_CHARS}; got {value!r}",
                              f"set it to {MIN_CHARS} or more, or drop it to send that tool's results whole")
    return ContextPolicy(tool_result_chars={str(k): int(v) for k, v in chars.items()}, keep_turns=keep, tools_per_turn=per_turn)
