"""The evidence-driven ``rule_miner``, and the reading of failures every evidence-driven mutator
shares. Offline and deterministic.

Failures are the workload scorer's structured records (``evoharness.compiler.runtime.workload.Failure``:
kind, tool, argument, expected, got, turn); nothing here parses a scorer's wording. A record's
``expected`` and ``got`` may carry task values: a ``MaskedFailure`` keeps only the kind, the tool
and the argument (and the masked text of an error), so no mutator can copy a task value into a
rule or into an LLM prompt.
"""
from __future__ import annotations

import ast
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import FAILURE_KINDS
from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.mutators.base import (
    FailedEpisode,
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    pick_section,
    positive_int,
    proposal,
    register_mutator,
    section_text,
    tool_edit,
    toolset_names,
)
from evoharness.search.mutators.wordings import RULES

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Failure kinds, most specific first (a pair's rule follows its most frequent kind, ties by this order).
KINDS = ("propagation", "wrong_value", "missing_argument", "extra_argument", "no_recovery", "wrong_tool", "premature_stop",
         "missed_call", "unneeded_call", "forbidden_tool", "unknown_tool")
assert set(KINDS) <= set(FAILURE_KINDS)
WRONG_CALL_KINDS = frozenset({"unneeded_call", "forbidden_tool", "unknown_tool"})  # a call that should not have been made

_KEYWORD = re.compile(rf"(?:^|[(,])\s*(?P<arg>{IDENT})=")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?")
_PATHLIKE = re.compile(r"(?<![\w.])[\w-]+(?:[./][\w-]+)+")  # report.pdf, a/b: values even when unquoted


@dataclass(frozen=True)
class MaskedFailure:
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
    except SyntaxError:  # truncated text: fall back to the keyword pattern
        pass
    return tuple(dict.fromkeys(m.group("arg") for m in _KEYWORD.finditer(call_text)))


def parse_failures(episode: FailedEpisode, tools: Mapping[str, ToolSpec] | None = None) -> tuple[MaskedFailure, ...]:
    """The failures of one episode as identifiers, deduplicated by (kind, tool, argument); records
    without a tool, or whose tool or argument is not an identifier, are left out."""
    unique: dict[tuple[str, str, str | None], MaskedFailure] = {}
    for f in episode.failures:
        if f.kind not in KINDS or not isinstance(f.tool, str) or not re.fullmatch(IDENT, f.tool):
            continue
        arg = f.argument if isinstance(f.argument, str) and re.fullmatch(IDENT, f.argument) else None
        error = mask_values(str(f.got)) if f.kind == "no_recovery" and f.got else ""
        unique.setdefault((f.kind, f.tool, arg), MaskedFailure(f.kind, f.tool, arg, error))
    return tuple(unique.values())


def failure_counts(evidence: Iterable[FailedEpisode], tools: Mapping[str, ToolSpec] | None = None) -> Counter[MaskedFailure]:
    """How many episodes show each failure (errors text dropped, so equal failures merge)."""
    counts: Counter[MaskedFailure] = Counter()
    for e in evidence:
        counts.update({MaskedFailure(f.kind, f.tool, f.arg) for f in parse_failures(e, tools)})
    return counts


def ranked_pairs(counts: Counter[MaskedFailure], *, min_count: int = 1) -> list[tuple[str, str | None, str, int]]:
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


def summarise(evidence: Sequence[FailedEpisode], *, limit: int, tools: Mapping[str, ToolSpec] | None = None) -> list[str]:
    """One line per failed episode (repeats merged with a count), identifiers only: the evidence
    block of an LLM request. Tool/argument pairs are written `tool.arg`, tools `tool`."""
    phrases = {
        "propagation": "mis-copied `{t}.{a}` from an earlier tool result", "wrong_value": "wrong value for `{t}.{a}`",
        "missing_argument": "missing argument `{t}.{a}`", "extra_argument": "unexpected argument `{t}.{a}`",
        "wrong_tool": "called another tool instead of `{t}`", "premature_stop": "answered before calling `{t}`",
        "missed_call": "missing call to `{t}`", "unneeded_call": "unneeded call to `{t}`",
        "forbidden_tool": "called `{t}`, which was not offered", "unknown_tool": "called `{t}`, which is no tool",
    }
    lines: Counter[str] = Counter()
    for e in evidence:
        turns = sorted({f.turn for f in e.failures if isinstance(f.turn, int)})
        parts = [f"turn {turns[0]}"] if turns else []
        for f in parse_failures(e, tools):
            if f.kind == "no_recovery":
                parts.append(f"call to `{f.tool}` failed and was not redone" + (f": {f.error}" if f.error else ""))
            else:
                parts.append(phrases[f.kind].format(t=f.tool, a=f.arg))
        if len(parts) > (1 if turns else 0):
            lines["; ".join(parts)] += 1
    ordered = sorted(lines.items(), key=lambda kv: -kv[1])[:limit]
    return [f"- {text}" + (f" (x{n})" if n > 1 else "") for text, n in ordered]


def failure_note(evidence: Iterable[FailedEpisode], tools: Mapping[str, ToolSpec] | None = None, *,
                 keep: Callable[[MaskedFailure], bool] = lambda f: True, limit: int = 3) -> str:
    """Which failures a proposal addresses, identifiers only: ``N failed episode(s): kind n (tool.arg,
    ...), ...`` over the failures ``keep`` accepts, kinds by episodes (then KINDS order), or ``no
    failure records`` when there are none."""
    episodes = 0
    per_kind: Counter[str] = Counter()
    pairs: dict[str, Counter[str]] = {}
    for e in evidence:
        found = [f for f in parse_failures(e, tools) if keep(f)]
        episodes += bool(found)
        per_kind.update({f.kind for f in found})
        for f in found:
            pairs.setdefault(f.kind, Counter())[f.tool + (f".{f.arg}" if f.arg else "")] += 1
    if not episodes:
        return "no failure records"
    parts = []
    for kind in sorted(per_kind, key=lambda k: (-per_kind[k], KINDS.index(k))):
        named = [p for p, _ in sorted(pairs[kind].items(), key=lambda kv: (-kv[1], kv[0]))]
        parts.append(f"{kind} {per_kind[kind]} ({', '.join(named[:limit])}{', …' if len(named) > limit else ''})")
    return f"{episodes} failed episode(s): {', '.join(parts)}"


# -- rule_miner ----------------------------------------------------------------------------

def rule_wordings(tool: str, arg: str | None, kind: str) -> tuple[str, ...]:
    """Every wording of the rule for a failure, built from identifiers only (so none can carry a
    task's values); empty when the kind has no rule, or names an argument and none is known."""
    if kind in ("propagation", "wrong_value", "missing_argument", "extra_argument") and not arg:
        return ()
    return tuple(w.format(t=tool, a=arg) for w in RULES.get(kind, ()))


@register_mutator("rule_miner")
def rule_miner(*, top_k: int = 3, min_count: int = 1, section: str | None = None, targets: str = "both",
               max_tools: int | None = None) -> Mutator:
    """Rules naming the tool and argument behind the ``top_k`` most frequent failures: all of them
    appended as lines to a prompt section (default policy), and/or a rule added to the edit of each
    of the first ``max_tools`` such tools (default: every one). Each failure kind has several
    wordings (``wordings.RULES``), one drawn with the rng; a failure any wording of whose rule is
    already there gets none."""
    positive_int("rule_miner", "top_k", top_k)
    positive_int("rule_miner", "min_count", min_count)
    if max_tools is not None:
        positive_int("rule_miner", "max_tools", max_tools)
    if targets not in ("tool", "section", "both"):
        raise ConfigError("params.targets", f"rule_miner targets tool, section or both, got {targets!r}", "use one of those")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        rows = [r for r in ranked_pairs(failure_counts(ctx.evidence, ctx.tools), min_count=min_count) if rule_wordings(r[0], r[1], r[2])]
        rows = rows[:top_k]
        # one wording per failure, drawn once, so a tool's rule and the section's line say the same
        rules = {(t, a, k): (rule_wordings(t, a, k), rng.choice(rule_wordings(t, a, k))) for t, a, k, _ in rows}
        out: list[Proposal] = []
        if targets in ("tool", "both"):
            # Only tools the anchor offers: an edit of a detached tool changes nothing the search tries
            # it on, and an override of a tool outside the catalog would not compile.
            offered = set(toolset_names(ctx)) & set(ctx.tools)
            for tool in list(dict.fromkeys(r[0] for r in rows if r[0] in offered))[:max_tools]:
                edit = tool_edit(ctx, tool)
                have = set(edit.get("rules", [])) | set(ctx.tools[tool].rules)
                new = [rule for t, a, k, _ in rows if t == tool for group, rule in [rules[t, a, k]] if not have & set(group)]
                if new:
                    note = "; ".join(f"{t}{'.' + a if a else ''} {k} in {n} failed episode(s)" for t, a, k, n in rows if t == tool)
                    out.append(proposal("tool", tool, {**edit, "rules": list(edit.get("rules", [])) + new}, "rule_miner", note))
        name = pick_section(ctx, "rule_miner", section, "rules")
        if targets in ("section", "both") and name is not None:
            text = section_text(ctx, name)
            lines = [f"- {rule}" for t, a, k, _ in rows for group, rule in [rules[t, a, k]] if not any(w in text for w in group)]
            if lines:
                note = "rules for " + ", ".join(f"{t}{'.' + a if a else ''} {k} ({n})" for t, a, k, n in rows)
                out.append(proposal("section", name, text.rstrip() + "\n" + "\n".join(lines), "rule_miner", note))
        return out

    return FunctionMutator("rule_miner", propose)
