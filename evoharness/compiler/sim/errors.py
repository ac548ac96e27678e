"""The error-probability formula: a pure function of tier, harness features and the gold call.

Every probability is ``base[tier] x product of factors``, clipped to MAX_P. The factors are
monotone in one observable property each, so the optimizer faces a known, smooth surface:

    common      = (1 + TEMP_SLOPE * T) * (1 + LENGTH_SLOPE * log2(1 + prompt_tokens / 1000))
    wrong_tool  = tier.wrong_tool  * common * FORMAT[f] * DOC(q_tool) * EX(tool) * RULE_TOOL(tool)
    wrong_value = tier.wrong_value * common * FORMAT[f] * DOC(q_arg)  * EX(tool) * RULE_ARG(tool, arg)
    propagation = tier.propagation * common * RULE_ARG(tool, arg)      (value seen in a tool result)
    malformed   = tier.malformed   * common * EX(tool)                   (bash only)
    skip_read   = tier.skip_read   * common * RULE_TOOL(read tool)       (read before a write)
    stop        = tier.premature_stop * common * PROCEDURE * RULE_STOP   (each gold call after the first)

The factors' sizes, and which words make a rule line or an example count, are the surface's
(``surface.py``): the constants below are the documented surface's.

    DOC(q) = 1 + DOC_WEIGHT * (1 - q); q = min(1, words / FULL_WORDS), 0 when undocumented.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from evoharness.compiler.sim.features import HarnessFeatures, names
from evoharness.compiler.sim.surface import DOCUMENTED, RULE_STOP_CAP, Surface
from evoharness.compiler.sim.tiers import Tier

TEMP_SLOPE = 1.0  # T=1 doubles every error rate
FORMAT = {"json": 1.0, "both": 1.05, "bash": 1.3}
DOC_WEIGHT = 2.0  # an undocumented tool/argument triples its error rate
FULL_WORDS_TOOL = 10  # a tool description this long (words) counts as complete
FULL_WORDS_ARG = 5  # an argument description this long counts as complete
MISSING_TOOL_STOP = 0.5  # gold tool not offered: stop with this probability, else a sibling
MAX_P = 0.9


@dataclass(frozen=True)
class CallContext:
    """The gold call about to be made, as far as error rates care."""

    tool: str
    args: tuple[str, ...]  # argument names in the gold call
    propagated: frozenset[str] = frozenset()  # args whose value appears in an earlier tool result
    skippable_read: bool = False  # read-only call followed by a write in the same turn
    first_in_turn: bool = False


@dataclass(frozen=True)
class CallErrorRates:
    wrong_tool: float
    wrong_value: Mapping[str, float] = field(default_factory=dict)
    propagation: Mapping[str, float] = field(default_factory=dict)
    malformed: float = 0.0
    skip_read: float = 0.0
    premature_stop: float = 0.0

    def any_error(self) -> float:
        """P(at least one error on this call), for reporting and calibration."""
        ok = (1 - self.wrong_tool) * (1 - self.malformed) * (1 - self.skip_read)
        ok *= (1 - self.premature_stop)
        for p in list(self.wrong_value.values()) + list(self.propagation.values()):
            ok *= 1 - p
        return 1 - ok


def completeness(text: str, full_words: int) -> float:
    return min(1.0, len(text.split()) / full_words)


def doc_factor(q: float) -> float:
    return 1.0 + DOC_WEIGHT * (1.0 - q)


def common_factor(features: HarnessFeatures, surface: Surface = DOCUMENTED) -> float:
    temp = 1.0 + TEMP_SLOPE * features.temperature
    length = 1.0 + surface.length_slope * math.log2(1.0 + features.prompt_tokens / 1000.0)
    return temp * length


def _rule_names(features: HarnessFeatures, surface: Surface, *identifiers: str) -> bool:
    return any(all(names(line, i) for i in identifiers) and surface.counts_as_rule(line) for line in features.rule_lines)


def _example_names(features: HarnessFeatures, surface: Surface, tool: str) -> bool:
    if surface is DOCUMENTED:
        return features.example_names_tool(tool)
    doc = features.tools.get(tool)
    if doc is not None and any(surface.is_example(line) for line in doc.lines):
        return True
    shown = [*features.lines, *(line for d in features.tools.values() for line in d.lines)]
    return any(surface.is_example(line) and names(line, tool) for line in shown)


def counted_rules(features: HarnessFeatures, surface: Surface) -> int:
    """Rule lines that name an offered tool and count on this surface (capped)."""
    n = sum(1 for line in features.rule_lines if surface.counts_as_rule(line) and any(names(line, t) for t in features.tools))
    return min(n, RULE_STOP_CAP)


def _clip(p: float) -> float:
    return min(MAX_P, max(0.0, p))


def call_error_rates(tier: Tier, features: HarnessFeatures, call: CallContext, surface: Surface = DOCUMENTED) -> CallErrorRates:
    common = common_factor(features, surface)
    fmt = FORMAT[features.tool_format]
    doc = features.tools.get(call.tool)
    q_tool = completeness(doc.description, FULL_WORDS_TOOL) if doc else 0.0
    example = surface.example if _example_names(features, surface, call.tool) else 1.0
    rule_tool = surface.rule_tool if _rule_names(features, surface, call.tool) else 1.0

    values: dict[str, float] = {}
    propagation: dict[str, float] = {}
    for arg in call.args:
        param = doc.params.get(arg) if doc else None
        q_arg = completeness(param.description, FULL_WORDS_ARG) if param else 0.0
        rule_arg = surface.rule_arg if _rule_names(features, surface, call.tool, arg) else 1.0
        values[arg] = _clip(tier.wrong_value * common * fmt * doc_factor(q_arg) * example * rule_arg)
        if arg in call.propagated:
            propagation[arg] = _clip(tier.propagation * common * rule_arg)

    procedure = surface.procedure if features.procedure else 1.0
    procedure *= (1.0 + surface.rule_stop * counted_rules(features, surface)) if surface.rule_stop else 1.0
    return CallErrorRates(
        wrong_tool=_clip(tier.wrong_tool * common * fmt * doc_factor(q_tool) * example * rule_tool),
        wrong_value=values,
        propagation=propagation,
        malformed=_clip(tier.malformed * common * example) if features.tool_format == "bash" else 0.0,
        skip_read=_clip(tier.skip_read * common * rule_tool) if call.skippable_read else 0.0,
        premature_stop=0.0 if call.first_in_turn else _clip(tier.premature_stop * common * procedure),
    )
