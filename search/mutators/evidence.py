"""Reading failure evidence, and the evidence-driven ``rule_miner``. Offline and deterministic.

The scorer's details name a tool and argument but also carry task values (``model=140
gold=150``, gold calls rendered with their arguments). Everything here reduces a detail to
identifiers, so no mutator can copy a gold value into a rule or into an LLM prompt.

Also here: the context readers every mutator shares (the anchor genome and what it picks), so
that edits stack on what the front already found instead of restarting from the baseline.
"""
from __future__ import annotations

import ast
import copy
import fnmatch
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.errors import ConfigError
from compiler.toolspec import ToolSpec
from search.genome import Genome, PoolEntry, SlotKind
from search.mutators.base import Control, Evidence, MutationContext, Mutator, Proposal, register_mutator

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Failure kinds, most specific first (a pair's rule follows its most frequent kind, ties by this order).
KINDS = ("wrong_value", "absent_arg", "extra_arg", "failed", "missing_call", "unexpected", "irrelevant", "not_offered")
WRONG_CALL_KINDS = frozenset({"unexpected", "irrelevant"})  # the model called a tool it should not have

_MISMATCH = re.compile(rf"(?<![\w.])(?P<tool>{IDENT})\.(?P<arg>{IDENT}): model=")
_MISSING = re.compile(rf"missing call (?P<tool>{IDENT})\(")
_FAILED = re.compile(rf"(?<![\w.])(?P<tool>{IDENT})\((?P<args>.*?)\) failed: (?P<error>[^;]*)")
_UNEXPECTED = re.compile(rf"unexpected call (?P<tool>{IDENT})\(")
_IRRELEVANT = re.compile(rf"irrelevance_error: .*? first (?P<tool>{IDENT})\(")
_EMPTY = re.compile(r"no tool call; gold: (?P<calls>.*)")
_CALL_START = re.compile(rf"(?<![\w.'\"])(?P<tool>{IDENT})\(")
_KEYWORD = re.compile(rf"(?:^|[(,])\s*(?P<arg>{IDENT})=")
_HEADER = re.compile(r"^turn (?P<turn>\d+): (?:multi_turn:)?(?P<type>[\w]+):")
_STATE = re.compile(rf"state differs in (?P<what>{IDENT}\.{IDENT}(?:, {IDENT}\.{IDENT})*)")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?")
_PATHLIKE = re.compile(r"(?<![\w.])[\w-]+(?:[./][\w-]+)+")  # report.pdf, a/b: values even when unquoted


@dataclass(frozen=True)
class Failure:
    """One thing a failed episode got wrong, as identifiers only (never values)."""

    kind: str  # one of KINDS
    tool: str
    arg: str | None = None
    error: str = ""  # masked error text (quoted strings and numbers replaced)


def mask_values(text: str, limit: int = 100) -> str:
    """Error text with quoted strings, paths and numbers replaced: what went wrong, not with what."""
    masked = _PATHLIKE.sub("…", _NUMBER.sub("N", _QUOTED.sub("'…'", text))).strip()
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def call_args(call_text: str) -> tuple[str, ...]:
    """Keyword names of a rendered call ``name(k=v, ...)``; parsed as text, never evaluated."""
    try:
        node = ast.parse(call_text, mode="eval").body
        if isinstance(node, ast.Call):
            return tuple(k.arg for k in node.keywords if k.arg)
    except SyntaxError:  # truncated detail: fall back to the keyword pattern
        pass
    return tuple(dict.fromkeys(m.group("arg") for m in _KEYWORD.finditer(call_text)))


def _named_arg(text: str, candidates: Iterable[str]) -> str | None:
    return next((a for a in candidates if re.search(rf"(?<![\w]){re.escape(a)}(?![\w])", text)), None)


def parse_failures(evidence: Evidence, tools: Mapping[str, ToolSpec] | None = None) -> tuple[Failure, ...]:
    """The failures of one episode, deduplicated (a failed call appears in the detail and in
    tool_errors, and must count once)."""
    detail = evidence.detail
    found: list[Failure] = []
    for m in _MISMATCH.finditer(detail):
        rest = detail[m.end():]
        kind = "absent_arg" if rest.startswith("'<missing>'") else "extra_arg" if re.match(r"\S+ gold='<missing>'", rest) else "wrong_value"
        found.append(Failure(kind, m.group("tool"), m.group("arg")))
    for m in _FAILED.finditer(detail):
        args = call_args(f"{m.group('tool')}({m.group('args')})")
        found.append(Failure("failed", m.group("tool"), _named_arg(m.group("error"), args), mask_values(m.group("error"))))
    found += [Failure("missing_call", m.group("tool")) for m in _MISSING.finditer(detail)]
    found += [Failure("unexpected", m.group("tool")) for m in _UNEXPECTED.finditer(detail)]
    found += [Failure("irrelevant", m.group("tool")) for m in _IRRELEVANT.finditer(detail)]
    empty = _EMPTY.search(detail)
    if empty:
        found += [Failure("missing_call", m.group("tool")) for m in _CALL_START.finditer(empty.group("calls"))]
    for line in evidence.tool_errors:
        tool, sep, error = line.partition(":")
        tool = tool.strip()
        if not sep or not re.fullmatch(IDENT, tool):
            continue
        if "is not offered" in error:
            found.append(Failure("not_offered", tool))
            continue
        params = tuple(tools[tool].properties()) if tools and tool in tools else ()
        found.append(Failure("failed", tool, _named_arg(error, params), mask_values(error)))
    unique: dict[tuple[str, str, str | None], Failure] = {}
    for f in found:
        unique.setdefault((f.kind, f.tool, f.arg), f)
    # A failed call whose argument is unknown adds nothing once a failure of that tool names one.
    named = {f.tool for f in unique.values() if f.arg}
    return tuple(f for f in unique.values() if not (f.kind == "failed" and f.arg is None and f.tool in named))


def failure_counts(evidence: Iterable[Evidence], tools: Mapping[str, ToolSpec] | None = None) -> Counter[Failure]:
    """How many episodes show each failure (errors text dropped, so equal failures merge)."""
    counts: Counter[Failure] = Counter()
    for e in evidence:
        counts.update({Failure(f.kind, f.tool, f.arg) for f in parse_failures(e, tools)})
    return counts


def ranked_pairs(counts: Counter[Failure], *, min_count: int = 1) -> list[tuple[str, str | None, str, int]]:
    """(tool, arg, dominant kind, episodes) per (tool, arg), most frequent first; argument pairs
    before tool-only ones on ties, then by name, so the order is stable."""
    per_pair: dict[tuple[str, str | None], Counter[str]] = {}
    for f, n in counts.items():
        per_pair.setdefault((f.tool, f.arg), Counter())[f.kind] += n
    rows = []
    for (tool, arg), kinds in per_pair.items():
        total = sum(kinds.values())
        if total >= min_count:
            kind = min(kinds, key=lambda k: (-kinds[k], KINDS.index(k)))
            rows.append((tool, arg, kind, total))
    return sorted(rows, key=lambda r: (-r[3], r[1] is None, r[0], r[1] or ""))


def summarise(evidence: Sequence[Evidence], *, limit: int, tools: Mapping[str, ToolSpec] | None = None) -> list[str]:
    """One line per failed episode (repeats merged with a count), identifiers only: the evidence
    block of an LLM request. Tool/argument pairs are written `tool.arg`, tools `tool`."""
    phrases = {
        "wrong_value": "wrong value for `{t}.{a}`", "absent_arg": "missing argument `{t}.{a}`",
        "extra_arg": "unexpected argument `{t}.{a}`", "missing_call": "missing call to `{t}`",
        "unexpected": "unexpected call to `{t}`", "irrelevant": "called `{t}` when no call was needed",
        "not_offered": "called `{t}`, which was not offered",
    }
    lines: Counter[str] = Counter()
    for e in evidence:
        head = _HEADER.match(e.detail)
        parts = [f"turn {head.group('turn')}, {head.group('type')}"] if head else []
        for f in parse_failures(e, tools):
            if f.kind == "failed":
                where = f"`{f.tool}.{f.arg}`" if f.arg else f"`{f.tool}`"
                parts.append(f"call to {where} failed" + (f": {f.error}" if f.error else ""))
            else:
                parts.append(phrases[f.kind].format(t=f.tool, a=f.arg))
        state = _STATE.search(e.detail)
        if state:
            parts.append(f"state differs in {state.group('what')}")
        if len(parts) > (1 if head else 0):
            lines["; ".join(parts)] += 1
    ordered = sorted(lines.items(), key=lambda kv: -kv[1])[:limit]
    return [f"- {text}" + (f" (x{n})" if n > 1 else "") for text, n in ordered]


# -- context readers shared by the mutators ------------------------------------------------

def anchor(ctx: MutationContext) -> Genome:
    """The genome new entries build on: the best front member (the search tries each new entry on it)."""
    return ctx.front[0] if ctx.front else Genome()


def section_text(ctx: MutationContext, name: str) -> str:
    entries = ctx.pools.sections[name]
    idx = anchor(ctx).sections.get(name, 0)
    return str(entries[idx].value if 0 <= idx < len(entries) else entries[0].value)


def tool_edit(ctx: MutationContext, name: str) -> dict[str, Any]:
    entries = ctx.pools.tools.get(name, ())
    idx = anchor(ctx).tools.get(name, 0)
    value = entries[idx].value if 0 <= idx < len(entries) else {}
    return copy.deepcopy(dict(value or {}))


def toolset_names(ctx: MutationContext, genome: Genome | None = None) -> list[str]:
    """The tool names a genome's toolset offers, patterns expanded against ctx.tools."""
    g = anchor(ctx) if genome is None else genome
    patterns = ctx.pools.toolsets[g.toolset].value if 0 <= g.toolset < len(ctx.pools.toolsets) else list(ctx.tools)
    names: dict[str, None] = {}
    for p in patterns:
        glob = any(c in p for c in "*?[")
        for n in [t for t in ctx.tools if fnmatch.fnmatchcase(t, p)] if glob else [p]:
            names.setdefault(n, None)
    return list(names)


def pick_section(ctx: MutationContext, mutator: str, section: str | None, default: str) -> str | None:
    """The section to edit: an explicit one must exist; the default is skipped when absent."""
    if section is not None:
        if section not in ctx.pools.sections:
            raise ValueError(f"{mutator}: section {section!r} is not a prompt section; "
                             f"set params.section to one of {sorted(ctx.pools.sections)}")
        return section
    return default if default in ctx.pools.sections else None


def proposal(kind: SlotKind, key: str | None, value: Any, author: str, note: str) -> Proposal:
    return Proposal(kind, key, PoolEntry(value, author, note))


@dataclass
class FunctionMutator:
    """A named mutator around a propose function; factories close over their parameters.

    Not frozen only because the Mutator protocol declares ``name`` as a settable attribute;
    nothing assigns to it.
    """

    name: str
    fn: Callable[[MutationContext, random.Random], Sequence[Proposal | Control]]

    def propose(self, ctx: MutationContext, *, rng: random.Random) -> Sequence[Proposal | Control]:
        return tuple(self.fn(ctx, rng))


def positive_int(mutator: str, param: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"params.{param}", f"{mutator} needs a positive integer, got {value!r}", "set it to 1 or more")
    return value


# -- rule_miner ----------------------------------------------------------------------------

RULES = {
    "wrong_value": "When calling `{t}`, take `{a}` exactly from the user's request or the latest tool result; "
                   "do not round, reformat or guess it.",
    "absent_arg": "When calling `{t}`, always pass `{a}`; take its value from the user's request or the latest tool result.",
    "extra_arg": "When calling `{t}`, pass `{a}` only when the user's request gives a value for it.",
    "failed_arg": "When calling `{t}`, check that `{a}` is valid for the current state before the call; "
                  "if the call fails, fix `{a}` and call again.",
    "failed": "If `{t}` returns an error, read it, fix the arguments and call `{t}` again before answering.",
    "missing_call": "Call `{t}` whenever the request needs what it does; do not skip it or answer before it has run.",
    "unexpected": "Call `{t}` only when the request asks for what it does; never call it by default.",
    "irrelevant": "If no offered tool fits the request or a needed value is missing, ask the user instead of calling `{t}`.",
}


def mined_rule(tool: str, arg: str | None, kind: str) -> str | None:
    """The rule for a failure, built from identifiers only (so it cannot carry a task's values)."""
    key = "failed_arg" if kind == "failed" and arg else kind
    if key in ("wrong_value", "absent_arg", "extra_arg") and not arg:
        return None
    template = RULES.get(key)
    return template.format(t=tool, a=arg) if template else None


@register_mutator("rule_miner")
def rule_miner(*, top_k: int = 3, min_count: int = 1, section: str | None = None, targets: str = "both") -> Mutator:
    """Rules naming the tool and argument behind the most frequent failures: a rule added to each
    such tool's edit, and/or all of them appended as lines to a prompt section (default policy)."""
    positive_int("rule_miner", "top_k", top_k)
    positive_int("rule_miner", "min_count", min_count)
    if targets not in ("tool", "section", "both"):
        raise ConfigError("params.targets", f"rule_miner targets tool, section or both, got {targets!r}", "use one of those")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        rows = [r for r in ranked_pairs(failure_counts(ctx.evidence, ctx.tools), min_count=min_count) if mined_rule(r[0], r[1], r[2])]
        rows = rows[:top_k]
        out: list[Proposal] = []
        if targets in ("tool", "both"):
            # Only tools the anchor offers: an edit of a detached tool changes nothing the search tries
            # it on, and an override of a tool outside the catalog would not compile.
            offered = set(toolset_names(ctx)) & set(ctx.tools)
            for tool in dict.fromkeys(r[0] for r in rows):
                if tool not in offered:
                    continue
                edit = tool_edit(ctx, tool)
                have = set(edit.get("rules", [])) | set(ctx.tools[tool].rules)
                new = [rule for t, a, k, _ in rows if t == tool and (rule := mined_rule(t, a, k)) and rule not in have]
                if new:
                    note = "; ".join(f"{t}{'.' + a if a else ''} failed in {n} episode(s) ({k})" for t, a, k, n in rows if t == tool)
                    out.append(proposal("tool", tool, {**edit, "rules": list(edit.get("rules", [])) + new}, "rule_miner", note))
        name = pick_section(ctx, "rule_miner", section, "policy")
        if targets in ("section", "both") and name is not None:
            text = section_text(ctx, name)
            lines = [f"- {rule}" for t, a, k, _ in rows if (rule := mined_rule(t, a, k)) and rule not in text]
            if lines:
                note = "rules for " + ", ".join(f"{t}{'.' + a if a else ''} ({n})" for t, a, _, n in rows)
                out.append(proposal("section", name, text.rstrip() + "\n" + "\n".join(lines), "rule_miner", note))
        return out

    return FunctionMutator("rule_miner", propose)
