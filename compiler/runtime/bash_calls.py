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

from compiler.runtime.arguments import MAX_ARGUMENT_CHARS, clip
from compiler.runtime.trajectory import ToolCall
from compiler.toolspec import ToolSpec

_BLOCK = re.compile(r"```tool[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass(frozen=True)
class DecodedText:
    calls: tuple[ToolCall, ...]
    errors: tuple[str, ...]  # one line per malformed call, sent back to the model


def _typed(value: str, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind and not value.strip().startswith(("[", "{"))):
        return value
    try:
        return json.loads(value)
    except RecursionError:
        raise ValueError(f"value {clip(repr(value), 200)} is nested too deeply to read") from None
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


def _quote_open(line: str) -> bool:
    try:
        shlex.split(line, comments=False, posix=True)
    except ValueError:
        return True
    return False


def decode_text_calls(text: str | None, tools: Mapping[str, ToolSpec]) -> DecodedText:
    """All calls in all ```tool blocks of ``text``; an unterminated block is malformed."""
    if not text or "```tool" not in text:
        return DecodedText((), ())
    calls: list[ToolCall] = []
    errors: list[str] = []
    for match in _BLOCK.finditer(text):
        if not match.group(0).rstrip().endswith("```"):
            errors.append("a ```tool block was opened but never closed with ```")
        lines = match.group(1).splitlines()
        i = 0
        while i < len(lines):
            line, i = lines[i], i + 1
            if not line.strip():
                continue
            # a quoted value may hold newlines: the call goes on until its quotes close
            while i < len(lines) and len(line) <= MAX_ARGUMENT_CHARS and _quote_open(line):
                line, i = f"{line}\n{lines[i]}", i + 1
            try:
                calls.append(parse_call_line(line.strip(), tools))
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
