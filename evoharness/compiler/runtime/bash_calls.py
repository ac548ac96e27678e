"""Decode tool calls written as `name --arg value` lines in a ```tool block of message text.

The text is tokenised with shlex (quoting only) and never handed to a shell. Values are typed
by the tool's JSON schema: strings stay strings, everything else is read as a JSON literal.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.runtime.arguments import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, MAX_REPLY_CHARS, clip, too_deep
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.toolspec import ToolSpec

_BLOCK = re.compile(r"```tool[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass(frozen=True)
class DecodedText:
    calls: tuple[ToolCall, ...]
    errors: tuple[str, ...]  # one line per malformed call, sent back to the model


def _typed(value: str, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind and not value.strip().startswith(("[", "{"))):
        return value
    if too_deep(value):
        raise ValueError(f"value {clip(repr(value), 200)} is nested too deeply: the limit is {MAX_ARGUMENT_DEPTH} levels; "
                         "write a flatter value")
    try:
        return json.loads(value)
    except RecursionError:
        raise ValueError(f"value {clip(repr(value), 200)} is nested too deeply to read; write a flatter value") from None
    except json.JSONDecodeError:
        if kind is None:
            return value
        raise ValueError(f"value {clip(repr(value), 200)} is not a valid {kind} (write it as a JSON literal)") from None


def parse_call_line(line: str, tools: Mapping[str, ToolSpec]) -> ToolCall:
    if len(line) > MAX_ARGUMENT_CHARS:
        raise ValueError(f"a call line of {len(line)} characters; the limit is {MAX_ARGUMENT_CHARS}")
    try:
        words = shlex.split(line, comments=False, posix=True)
    except ValueError as exc:
        raise ValueError(f"cannot read {clip(repr(line), 200)}: {exc} (check the quotes)") from None
    if not words:
        raise ValueError("empty call line")
    name, rest = words[0], words[1:]
    props = tools[name].properties() if name in tools else {}
    args: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        flag = rest[i]
        if not flag.startswith("--") or len(flag) == 2:
            raise ValueError(f"{name}: expected --argument, got {flag!r}")
        key, eq, inline = flag[2:].partition("=")
        if eq:
            raw, i = inline, i + 1
        elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            raw, i = rest[i + 1], i + 2
        else:  # a bare flag is a boolean switch
            raw, i = "true", i + 1
        if key in args:
            raise ValueError(f"{name}: argument --{key} given twice")
        args[key] = _typed(raw, props.get(key, {}))
    return ToolCall(name=name, arguments=args)


_OPENS = re.compile(r"""['"\\]""")
_ENDS_DOUBLE = re.compile(r'["\\]')


def _open_quote(text: str, state: str = "") -> str:
    """The quoting still open at the end of ``text`` by shlex's POSIX rules (those parse_call_line reads
    with), carried on from ``state``: "" none, "'" or '"' an open quote, "\\" a backslash outside quotes
    and '"\\' one inside double quotes, each waiting for the character it escapes. It carries from line
    to line, so a call spread over many lines is scanned once rather than re-split at every line."""
    i = 0
    while i < len(text):
        if state == "":
            match = _OPENS.search(text, i)
            if match is None:
                return ""
            state, i = match.group(), match.end()
        elif state == "'":  # nothing escapes inside single quotes
            end = text.find("'", i)
            if end < 0:
                return state
            state, i = "", end + 1
        elif state == '"':
            match = _ENDS_DOUBLE.search(text, i)
            if match is None:
                return state
            state, i = ("" if match.group() == '"' else '"\\'), match.end()
        else:  # a backslash takes the next character, whatever it is
            state, i = ("" if state == "\\" else '"'), i + 1
    return state


def decode_text_calls(text: str | None, tools: Mapping[str, ToolSpec]) -> DecodedText:
    """All calls in all ```tool blocks of ``text``; an unterminated block is malformed."""
    if not text or "```tool" not in text:
        return DecodedText((), ())
    calls: list[ToolCall] = []
    errors: list[str] = []
    if len(text) > MAX_REPLY_CHARS:  # the conversation keeps no more of a reply than this, so no call is read past it
        errors.append(f"the reply is {len(text)} characters long; calls after its first {MAX_REPLY_CHARS} were not read "
                      "(write shorter replies)")
        text = text[:MAX_REPLY_CHARS]
    for match in _BLOCK.finditer(text):
        if not match.group(0).rstrip().endswith("```"):
            errors.append("a ```tool block was opened but never closed with ```")
        lines = match.group(1).splitlines()
        i = 0
        while i < len(lines):
            parts, i = [lines[i]], i + 1
            if not parts[0].strip():
                continue
            # a quoted value may hold newlines: the call goes on until its quotes close
            size, state = len(parts[0]), _open_quote(parts[0])
            while i < len(lines) and size <= MAX_ARGUMENT_CHARS and state:
                state = _open_quote("\n" + lines[i], state)
                parts.append(lines[i])
                size, i = size + 1 + len(lines[i]), i + 1
            try:
                calls.append(parse_call_line("\n".join(parts).strip(), tools))
            except ValueError as exc:
                errors.append(str(exc))
    return DecodedText(tuple(calls), tuple(errors))


def format_call_line(call: ToolCall) -> str:
    """The inverse of parse_call_line, used by test doubles and docs."""
    parts = [call.name]
    for key, value in call.arguments.items():
        # --key=value keeps a value that itself starts with "--" from reading as a flag
        parts.append(f"--{key}=" + shlex.quote(value if isinstance(value, str) else json.dumps(value)))
    return " ".join(parts)
