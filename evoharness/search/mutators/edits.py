"""The rule-based text mutators: offline, deterministic given the rng, one small edit each.

Edits build on what the best front genome already picks (see ``base.anchor``), so a good
section or tool edit found in one round is extended, not thrown away, in the next. Text edits
only ever add: the original section stays in the result.
"""
from __future__ import annotations

import random
import re

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.mutators.base import (
    Control,
    FunctionMutator,
    MutationContext,
    Mutator,
    Proposal,
    anchor,
    pick_section,
    positive_int,
    proposal,
    register_mutator,
    section_role,
    section_text,
    tool_edit,
    toolset_names,
)
from evoharness.search.mutators.rule_miner import failure_counts, failure_note, ranked_pairs
from evoharness.search.mutators.wordings import (
    CLARIFY_ARTICLE,
    CLARIFY_BARE,
    CLARIFY_TEXT,
    CLARITY,
    CLARITY_ANY,
    GENERIC_SENTENCES,
    SENTENCES,
    TOOL_RULE_FOR_FAILURE,
    TOOL_RULES,
    Group,
    present,
)

GENERIC = "generic: reads no failure records"  # the note of an edit that is not drawn from evidence

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")
_JINJA = re.compile(r"\{[{%#]")


def _grow(name: str, old: str, new: str) -> str:
    # The contract of every text edit: improve, never gut.
    if old not in new and len(new) < len(old):
        raise AssertionError(f"{name} would shorten a section ({len(old)} -> {len(new)} chars); this is a bug in {name}")
    return new


@register_mutator("identity")
def identity(*, count: int = 2) -> Mutator:
    """Control: the best ``count`` front genomes again (baseline when the front is empty); the
    search re-evaluates them with fresh samples, which measures noise."""
    positive_int("identity", "count", count)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Control]:
        return [Control(g, "identity") for g in (ctx.front or (anchor(ctx),))[:count]]

    return FunctionMutator("identity", propose)


def _nudge(name: str, where: str, section: str | None, default: str, text: str | None) -> Mutator:
    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        target = pick_section(ctx, name, section, default)
        if target is None:
            return []
        current = section_text(ctx, target)
        role = section_role(ctx.agent, target) or ""
        pool: tuple[Group, ...] = ((text,),) if text is not None else SENTENCES.get(role, GENERIC_SENTENCES)
        # which sentence and which of its wordings are both the rng's; one the section says in any wording is passed over
        group = next((g for g in rng.sample(pool, len(pool)) if not present(current, g)), None)
        if group is None:
            return []
        sentence = rng.choice(group)
        new = f"{sentence} {current.lstrip()}" if where == "prefix" else f"{current.rstrip()} {sentence}"
        return [proposal("section", target, _grow(name, current, new), name, f"{where}: {sentence} ({GENERIC})")]

    return FunctionMutator(name, propose)


@register_mutator("prompt_prefix")
def prompt_prefix(*, section: str | None = None, text: str | None = None) -> Mutator:
    """Prepends one generic instruction (or ``text``) to ``section`` (default: the rules section, if any)."""
    return _nudge("prompt_prefix", "prefix", section, "rules", text)


@register_mutator("prompt_suffix")
def prompt_suffix(*, section: str | None = None, text: str | None = None) -> Mutator:
    """Appends one generic instruction (or ``text``) to ``section`` (default: the style section, if any)."""
    return _nudge("prompt_suffix", "suffix", section, "style", text)


@register_mutator("section_rewriter")
def section_rewriter(*, section: str | None = None) -> Mutator:
    """Improves a section without removing anything: one sentence per line as a bulleted list
    (when the section is plain prose without template markup), plus one imperative sentence
    that makes the section's force explicit. ``section`` None picks one with the rng."""

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        name = pick_section(ctx, "section_rewriter", section, None) or rng.choice(sorted(ctx.pools.sections))
        current = section_text(ctx, name)
        sentences = _SENTENCE_END.split(current.strip())
        # Only a one-paragraph section is restructured: lines a mutator added must stay lines.
        if "\n" not in current.strip() and len(sentences) > 1 and not _JINJA.search(current):
            text, bulleted = "\n".join(f"- {s}" for s in sentences), True
            if len(text) < len(current):  # whitespace runs longer than a bullet break: keep the original
                text, bulleted = current, False
        else:
            text, bulleted = current, any(line.lstrip().startswith("- ") for line in current.splitlines())
        group = next((g for g in CLARITY.get(section_role(ctx.agent, name) or "", ()) + CLARITY_ANY if not present(current, g)), None)
        extra = rng.choice(group) if group is not None else None
        if extra is not None:
            text = text.rstrip() + (f"\n- {extra}" if bulleted else f" {extra}")
        if text == current:
            return []
        return [proposal("section", name, _grow("section_rewriter", current, text), "section_rewriter",
                         f"structure and explicit imperatives ({GENERIC})")]

    return FunctionMutator("section_rewriter", propose)


@register_mutator("temperature")
def temperature(*, min_gap: float = 0.05) -> Mutator:
    """0.0 when it is not pooled yet, else the midpoint of the widest gap between pooled
    temperatures in [0, 1] (1.0 counts as an edge); nothing once that midpoint would lie closer
    than ``min_gap`` to a pooled value."""
    if not isinstance(min_gap, int | float) or not 0 < min_gap < 0.5:
        raise ConfigError("params.min_gap", f"temperature needs a number in (0, 0.5), got {min_gap!r}", "use e.g. 0.05")

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        pooled = sorted({float(e.value) for e in ctx.pools.temperatures if 0.0 <= float(e.value) <= 1.0})
        if 0.0 not in pooled:
            return [proposal("temperature", None, 0.0, "temperature", "greedy decoding")]
        edges = pooled + ([1.0] if pooled[-1] < 1.0 else [])
        gaps = sorted(zip(edges, edges[1:]), key=lambda ab: (-(ab[1] - ab[0]), ab[0]))
        if not gaps or gaps[0][1] - gaps[0][0] < 2 * min_gap:
            return []
        lo, hi = gaps[0]
        value = round((lo + hi) / 2, 2)
        return [proposal("temperature", None, value, "temperature", f"midpoint of {lo} and {hi}")]

    return FunctionMutator("temperature", propose)


def _targets(ctx: MutationContext, rng: random.Random) -> list[tuple[str, list[str], str]]:
    """(tool, failing args, dominant kind) from the evidence, most frequent first; else one rng-
    chosen tool. Only tools the anchor offers (an edit of a detached tool changes nothing the
    search tries it on) that are in ctx.tools (an override of any other would not compile)."""
    offered = [t for t in toolset_names(ctx) if t in ctx.tools]
    found: dict[str, tuple[list[str], str]] = {}
    for tool, arg, kind, _ in ranked_pairs(failure_counts(ctx.evidence, ctx.tools)):
        if tool in offered:
            args, _ = found.setdefault(tool, ([], kind))
            if arg and arg not in args:
                args.append(arg)
    if found:
        return [(t, a, k) for t, (a, k) in found.items()]
    return [(rng.choice(offered), [], "")] if offered else []


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() or len(text) == 1 else text


def clarifications(spec: ToolSpec, arg: str) -> tuple[str, ...]:
    """The wordings of a sentence about one argument, from the tool's own parameter schema."""
    prop = spec.properties().get(arg) or {}
    need = "required" if arg in spec.required() else "optional"
    desc = " ".join(str(prop.get("description") or "").split()).rstrip(". ")
    if not desc:
        kind = f"a {prop['type']}" if isinstance(prop.get("type"), str) else "a value"
        return tuple(w.format(a=arg, n=need, k=kind) for w in CLARIFY_BARE)
    if desc.lower().startswith(("the ", "a ", "an ")):
        return tuple(w.format(a=arg, n=need, d=_lower_first(desc)) for w in CLARIFY_ARTICLE)
    return tuple(w.format(a=arg, n=need, d=desc) for w in CLARIFY_TEXT)


def _about(ctx: MutationContext, tool: str) -> str:
    return failure_note(ctx.evidence, ctx.tools, keep=lambda f: f.tool == tool)


@register_mutator("tool_description_append")
def tool_description_append(*, max_args: int = 2) -> Mutator:
    """Appends to the description of the tool most named in the evidence (else an offered tool)
    a clarification of its failing (else required) arguments, from its parameter schema, in one of
    several wordings drawn with the rng; an argument already clarified in any wording is passed over."""
    positive_int("tool_description_append", "max_args", max_args)

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        for tool, failing, _ in _targets(ctx, rng):
            spec = ctx.tools[tool]
            edit = tool_edit(ctx, tool)
            have = f"{spec.description} {edit.get('description_append', '')}"
            args = [a for a in dict.fromkeys(failing + list(spec.required()) + list(spec.properties())) if a in spec.properties()]
            new = [(a, rng.choice(group)) for a in args if not present(have, group := clarifications(spec, a))][:max_args]
            if new:
                append = " ".join([str(edit.get("description_append", "")).strip(), *(s for _, s in new)]).strip()
                note = f"clarify {tool}: {', '.join(a for a, _ in new)} ({_about(ctx, tool)})"
                return [proposal("tool", tool, {**edit, "description_append": append}, "tool_description_append", note)]
        return []

    return FunctionMutator("tool_description_append", propose)


@register_mutator("tool_rule_add")
def tool_rule_add() -> Mutator:
    """Adds one rule naming the tool most named in the evidence (else an offered tool); which rule
    follows how it failed: an error left as it was (retry), a call it should not have made
    (restraint), a call it skipped (make it), anything else (required arguments), and the others
    after it in that order when it is there already. Each rule has several wordings
    (``wordings.TOOL_RULES``), one drawn with the rng; a rule present in any wording is passed over."""

    def propose(ctx: MutationContext, rng: random.Random) -> list[Proposal]:
        for tool, _, kind in _targets(ctx, rng):
            spec, edit = ctx.tools[tool], tool_edit(ctx, tool)
            required = ", ".join(f"`{a}`" for a in spec.required())
            first = TOOL_RULE_FOR_FAILURE.get(kind, "arguments")
            order = [first, *(k for k in TOOL_RULES if k != first)]
            have = " ".join([*edit.get("rules", []), *spec.rules])
            groups = [(k, tuple(w.format(t=tool, r=f" ({required})" if required else "") for w in TOOL_RULES[k])) for k in order]
            found = next(((k, g) for k, g in groups if not present(have, g)), None)
            if found is not None:
                rule = rng.choice(found[1])
                return [proposal("tool", tool, {**edit, "rules": [*edit.get("rules", []), rule]}, "tool_rule_add",
                                 f"{found[0]} rule for {tool} ({_about(ctx, tool)})")]
        return []

    return FunctionMutator("tool_rule_add", propose)


@register_mutator("tool_format")
def tool_format() -> Mutator:
    """Proposes nothing, on purpose: the tool format is a full categorical of the genome (json,
    bash, both), so the search already tries every format on every candidate; there is no pool
    to grow. Registered so that configs written for other tools can name it harmlessly."""
    return FunctionMutator("tool_format", lambda ctx, rng: [])
