"""What the simulator reads off a request: the harness's observable properties.

Only documented cues count (see docs/sim-model.md): the tool format (native ``tools`` and/or a
``## Tools`` prompt section), each offered tool's description and argument descriptions, rule
lines naming a tool (and argument), example lines naming a tool, the ``## Procedure`` steps,
style words, the system prompt's length and the temperature.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ToolFormat = Literal["json", "bash", "both"]

CONCISE_CUES = ("concise", "brief", "briefly", "short", "terse", "succinct")
VERBOSE_CUES = ("detailed", "detail", "explain", "explanation", "thorough", "thoroughly",
                "verbose", "elaborate")
_EXAMPLE_LINE = re.compile(r"^\s*(?:[-*]\s*)?examples?\s*:", re.IGNORECASE)
_PROCEDURE_LINE = re.compile(r"^\s*\d+[.)]\s*(?P<name>[^:]+?)\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class ParamDoc:
    description: str = ""
    type: str = ""
    required: bool = False


@dataclass(frozen=True)
class ToolDoc:
    name: str
    description: str = ""
    params: Mapping[str, ParamDoc] = field(default_factory=dict)
    examples: tuple[str, ...] = ()  # example lines shown with this tool
    lines: tuple[str, ...] = ()  # every line of its documentation, for a surface with other example markers


@dataclass(frozen=True)
class ProcedureStep:
    name: str
    instructions: str

    @property
    def is_verify(self) -> bool:
        return "verify" in self.name.lower() or "verify" in self.instructions.lower()


@dataclass(frozen=True)
class HarnessFeatures:
    tool_format: ToolFormat
    tools: Mapping[str, ToolDoc]  # offered tools by name
    rule_lines: tuple[str, ...]  # every system prompt line outside the ## Tools section
    example_lines: tuple[str, ...]  # "Example: ..." lines anywhere (prompt or tool descriptions)
    procedure: tuple[ProcedureStep, ...]
    style: int  # -1 concise, 0 neutral, +1 detailed
    prompt_tokens: int  # system prompt length, estimated as chars / 4
    temperature: float
    lines: tuple[str, ...] = ()  # every non-empty system prompt line, stripped

    @property
    def has_verify(self) -> bool:
        return any(step.is_verify for step in self.procedure)

    def step(self, name: str) -> ProcedureStep | None:
        return next((s for s in self.procedure if s.name.strip().lower() == name.strip().lower()),
                    None)

    def rule_names_tool(self, tool: str) -> bool:
        return any(names(line, tool) for line in self.rule_lines)

    def rule_names_arg(self, tool: str, arg: str) -> bool:
        return any(names(line, tool) and names(line, arg) for line in self.rule_lines)

    def example_names_tool(self, tool: str) -> bool:
        doc = self.tools.get(tool)
        if doc is not None and doc.examples:
            return True
        return any(names(line, tool) for line in self.example_lines)


def names(text: str, identifier: str) -> bool:
    """Whole-identifier match: 'cd' matches 'use cd --folder' but not 'abcd'."""
    if not identifier:
        return False
    pattern = rf"(?<![A-Za-z0-9_]){re.escape(identifier)}(?![A-Za-z0-9_])"
    return re.search(pattern, text) is not None


def split_sections(prompt: str) -> list[tuple[str, list[str]]]:
    """``## Title`` blocks in order; text before the first heading is section ''."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in prompt.splitlines():
        if line.startswith("## ") and not line.startswith("### "):
            sections.append((line[3:].strip(), []))
        else:
            sections[-1][1].append(line)
    return sections


def _parse_tools_section(lines: Sequence[str]) -> dict[str, ToolDoc]:
    """The bash-format tool blocks: ``### name``, description, ``name --arg <type>  desc``,
    ``Example: ...``."""
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("### "):
            blocks.append((line[4:].strip(), []))
        elif blocks:
            blocks[-1][1].append(line)
    tools: dict[str, ToolDoc] = {}
    for name, body in blocks:
        param_re = re.compile(
            rf"^\s*{re.escape(name)}\s+--(?P<arg>[\w.-]+)(?:\s+<(?P<type>[^>]*)>)?\s*(?P<desc>.*)$"
        )
        desc_lines: list[str] = []
        params: dict[str, ParamDoc] = {}
        examples: list[str] = []
        for raw in body:
            line = raw.strip()
            if not line:
                continue
            if _EXAMPLE_LINE.match(line):
                examples.append(line)
                continue
            m = param_re.match(line)
            if m:
                desc = m.group("desc").strip()
                required = desc.endswith("(required)")
                if required:
                    desc = desc[: -len("(required)")].strip()
                params[m.group("arg")] = ParamDoc(desc, (m.group("type") or "").strip(), required)
            elif not params:
                desc_lines.append(line)
        tools[name] = ToolDoc(name, " ".join(desc_lines), params, tuple(examples),
                              tuple(ln.strip() for ln in body if ln.strip()))
    return tools


def _parse_native_tools(tools: Sequence[Mapping[str, Any]]) -> dict[str, ToolDoc]:
    docs: dict[str, ToolDoc] = {}
    for entry in tools:
        fn = entry.get("function", entry)
        if not isinstance(fn, Mapping) or not fn.get("name"):
            continue
        schema = fn.get("parameters") or {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        params = {
            arg: ParamDoc(str((spec or {}).get("description") or ""),
                          str((spec or {}).get("type") or ""), arg in required)
            for arg, spec in props.items()
        }
        description = str(fn.get("description") or "")
        examples = tuple(ln.strip() for ln in description.splitlines() if _EXAMPLE_LINE.match(ln))
        lines = tuple(ln.strip() for ln in description.splitlines() if ln.strip())
        docs[str(fn["name"])] = ToolDoc(str(fn["name"]), description, params, examples, lines)
    return docs


def _merge(native: ToolDoc, text: ToolDoc) -> ToolDoc:
    """Format 'both' shows a tool twice; the model uses whichever documentation is fuller."""
    params = dict(text.params)
    for arg, doc in native.params.items():
        other = params.get(arg)
        if other is None or len(doc.description) >= len(other.description):
            params[arg] = doc
    description = max(native.description, text.description, key=len)
    return ToolDoc(native.name, description, params, native.examples + text.examples, native.lines + text.lines)


def _style(lines: Sequence[str]) -> int:
    text = "\n".join(lines).lower()
    verbose = sum(1 for cue in VERBOSE_CUES if names(text, cue))
    concise = sum(1 for cue in CONCISE_CUES if names(text, cue))
    return (verbose > concise) - (concise > verbose)


def extract_features(
    system_prompt: str,
    tools: Sequence[Mapping[str, Any]] | None,
    temperature: float,
) -> HarnessFeatures:
    sections = split_sections(system_prompt)
    tool_lines = [ln for title, body in sections if title.lower() == "tools" for ln in body]
    other_lines = [
        ln.strip() for title, body in sections if title.lower() != "tools" for ln in body
        if ln.strip()
    ]
    procedure = tuple(
        ProcedureStep(m.group("name").strip(), m.group("text").strip())
        for title, body in sections if title.lower() == "procedure"
        for m in (_PROCEDURE_LINE.match(ln) for ln in body) if m
    )
    text_tools = _parse_tools_section(tool_lines)
    native_tools = _parse_native_tools(tools or ())
    if native_tools and text_tools:
        tool_format: ToolFormat = "both"
        merged = {n: _merge(d, text_tools[n]) if n in text_tools else d
                  for n, d in native_tools.items()}
    elif text_tools:
        tool_format, merged = "bash", text_tools
    else:
        tool_format, merged = "json", native_tools
    example_lines = tuple(ln.strip() for ln in system_prompt.splitlines() if _EXAMPLE_LINE.match(ln))
    example_lines += tuple(e for d in native_tools.values() for e in d.examples)
    return HarnessFeatures(
        tool_format=tool_format,
        tools=merged,
        rule_lines=tuple(other_lines),
        example_lines=example_lines,
        procedure=procedure,
        style=_style(other_lines),
        prompt_tokens=len(system_prompt) // 4,
        temperature=max(0.0, float(temperature)),
        lines=tuple(ln.strip() for ln in system_prompt.splitlines() if ln.strip()),
    )
