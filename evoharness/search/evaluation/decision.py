"""The decision rule (``criteria.decision``): which front member ships and what its holdout claim
means. One class per rule, built once from the criteria config (``decision_rule``) and handed to
whatever chooses, claims or words a verdict; nothing else names a rule.

A rule owns its bar (how far below the reference's quality the champion may be, or None when the
champion must beat it), its pick on dev, the test its holdout claim makes, the wording of that
claim's verdicts, and whether it may be measured against a named reference model.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from evoharness.compiler.errors import ConfigError
from evoharness.search.evaluation.metrics import EvalReport, paired_clusters, paired_scores
from evoharness.search.evaluation.stats import (
    ClaimVerdict,
    PairedTest,
    noninferiority_verdict,
    quality_test,
    saving_test,
    superiority_verdict,
)

Evidence = Literal["interval", "point"]
_TOL = 1e-12


@dataclass(frozen=True)
class DevCandidate:
    """A front member as a non-inferiority rule sees it: its dev quality, the lower bound of its
    paired dev difference against the reference (same tasks, one-sided at the claim's confidence),
    its dev cost per task and p95 latency, and whether it meets every hard criterion."""

    quality: float
    diff_low: float
    cost: float
    feasible: bool
    latency: float = 0.0


@dataclass(frozen=True)
class TrainStanding:
    """A variant's train result as the dev selection reads it: its train quality, its figure on
    the resource a rule saves (cost per task or p95 latency; inf when unknown), and the interval of
    its paired train difference against the reference (same tasks, clusters as the unit, the
    claim's interval at search.confidence; None without paired evidence, and for the reference
    itself)."""

    quality: float
    resource: float = float("inf")
    low: float | None = None
    high: float | None = None


Reach = Literal["none", "possible", "likely", "shown"]


@dataclass(frozen=True)
class TrainChance:
    """What a member's train result says about its chance to clear a rule's bar on dev:
    ``none`` (``why`` says why, in a few words), ``possible`` (the upper end of its paired train
    interval reaches the bar), ``likely`` (its point estimate does too) or ``shown`` (its whole
    interval does)."""

    reach: Reach
    why: str | None = None


def _figure(metric: str, value: float) -> str:
    return f"${value:.4g}/task" if metric == "cost_per_task" else f"{value:.3g}s" if metric.startswith("latency") else f"{value:.4g}"


@dataclass(frozen=True)
class ClaimTest:
    """What a rule's holdout test found: the verdict, the quality test, how the test is described,
    and the rule's own fields of claim.json."""

    verdict: ClaimVerdict
    quality: PairedTest
    test: str
    extra: Mapping[str, Any]


def noninferior_pick(candidates: Sequence[DevCandidate], *, reference: float, margin: float, order: str = "cost",
                     reference_value: float = float("inf")) -> tuple[int, Evidence] | None:
    """Index of the feasible candidate lowest in ``order`` (``cost`` or ``latency``), below the
    reference's ``reference_value`` there, whose dev quality is non-inferior within ``margin``, and
    on what evidence: ``interval`` when the lower bound of its paired dev difference clears
    ``-margin`` (what the holdout claim will test, so a lucky dev point estimate does not ship),
    else ``point`` when only its point estimate does. Ties: higher quality, then the first. None
    when no candidate qualifies even on its point estimate (the reference itself then wins)."""
    def key(c: DevCandidate) -> float:
        return c.cost if order == "cost" else c.latency

    below = [i for i, c in enumerate(candidates) if c.feasible and key(c) < reference_value]
    for evidence, ok in (("interval", lambda c: c.diff_low >= -margin - _TOL),
                         ("point", lambda c: c.quality >= reference - margin - _TOL)):
        eligible = [i for i in below if ok(candidates[i])]
        if eligible:
            return min(eligible, key=lambda i: (key(candidates[i]), -candidates[i].quality, i)), evidence  # type: ignore[return-value]
    return None


def _latency_pairs(baseline: EvalReport, champion: EvalReport) -> tuple[np.ndarray, np.ndarray]:
    tasks, _, _ = paired_scores(baseline, champion)
    a, b = {r.task_id: r for r in baseline.tasks}, {r.task_id: r for r in champion.tasks}
    return (np.array([a[t].latency_mean for t in tasks], dtype=float), np.array([b[t].latency_mean for t in tasks], dtype=float))


@dataclass(frozen=True)
class DecisionRule(ABC):
    """``margin``: how far below the reference's quality a non-inferior champion may be;
    ``reference``: ``incumbent`` or a search.models name the champion is measured against."""

    margin: float = 0.05
    reference: str = "incumbent"
    name: ClassVar[str]
    comparative: ClassVar[str] = "better"  # what the champion is, against the reference
    superlative: ClassVar[str] = "best"

    @property
    def bar(self) -> float | None:
        """The margin the champion's quality may fall below the reference's, or None when it must beat it."""
        return self.margin

    @property
    def against_reference(self) -> bool:
        """Whether the pick on dev is a paired comparison with the reference (else: best rank key)."""
        return True

    def resource(self) -> tuple[str, str] | None:
        """(dev metric, per-task row field) the rule saves on, or None."""
        return None

    def train_chance(self, member: TrainStanding, reference: TrainStanding, *, min_effect: float, quality: str = "quality",
                     against: str = "reference") -> TrainChance:
        """Whether ``member``'s train result leaves it a chance to clear this rule's bar on dev. The
        bar is the claim's (``quality_bar``: -margin, or +min_effect for a superiority rule) on the
        difference member minus reference. No chance: the upper end of its paired train interval is
        below the bar, or, under a rule that saves a resource, it does not save it against the
        reference on train. Without paired train evidence only the resource and the point estimate
        (the difference of the train qualities) are judged: the dev run then decides."""
        bar = self.quality_bar(min_effect)
        res = self.resource()
        if res is not None and not member.resource < reference.resource:
            return TrainChance("none", f"not {self.comparative} than the {against} on train ({_figure(res[0], member.resource)} "
                                       f"against {_figure(res[0], reference.resource)})")
        if member.high is not None and member.high < bar - _TOL:
            return TrainChance("none", f"train {quality} {member.quality:.3f} against the {against}'s {reference.quality:.3f}: the "
                                       f"paired difference is at most {member.high:+.3f}, below the bar {bar:+g}")
        if member.low is not None and member.low >= bar - _TOL:
            return TrainChance("shown")
        return TrainChance("likely" if member.quality - reference.quality >= bar - _TOL else "possible")

    def pick(self, candidates: Sequence[DevCandidate], *, reference: Mapping[str, float], quality: str
             ) -> tuple[int, Evidence] | None:
        res = self.resource()
        assert res is not None, "a best-quality rule picks by rank key"
        return noninferior_pick(candidates, reference=float(reference.get(quality, 0.0)), margin=self.margin,
                                order="cost" if res[0] == "cost_per_task" else "latency",
                                reference_value=float(reference.get(res[0], float("inf"))))

    @abstractmethod
    def claim(self, baseline: EvalReport, champion: EvalReport, *, metric: str, confidence: float, resamples: int,
              min_effect: float, seed: int) -> ClaimTest: ...

    @abstractmethod
    def meaning(self, verdict: str, claim: Mapping[str, Any], *, min_effect: float) -> str:
        """What ``verdict`` says, in the words of the question this rule asks."""

    def bound(self, min_effect: float) -> str:
        return f"margin {self.margin:g}"

    def quality_bar(self, min_effect: float) -> float:
        """The value the claim's interval low end must clear."""
        return -self.margin

    @abstractmethod
    def win_words(self) -> str:
        """A win, in a few words."""

    def shortfall(self, claim: Mapping[str, Any]) -> str:
        """Why a claim that is not a win is not one, for the report's banner."""
        return f"{self.win_words().capitalize()} within {self.margin:g} was not shown on the holdout."

    def check_reference(self, value: str) -> str:
        return value


def _noninferior_claim(rule: DecisionRule, baseline: EvalReport, champion: EvalReport, *, metric: str, confidence: float,
                       resamples: int, seed: int) -> ClaimTest:
    res = rule.resource()
    assert res is not None
    _, field = res
    a_q, b_q = paired_scores(baseline, champion, metric=metric)[1:]
    clusters = paired_clusters(baseline, champion)
    result = quality_test(a_q, b_q, null=-rule.margin, clusters=clusters, confidence=confidence)
    if field == "cost":
        _, a, b = paired_scores(baseline, champion, metric="cost_per_task")
    else:
        a, b = _latency_pairs(baseline, champion)
    saving = saving_test(b, a, clusters=clusters, resamples=resamples, confidence=confidence, seed=seed)  # baseline - champion
    verdict = noninferiority_verdict(result, saving, margin=rule.margin)
    test = (f"non-inferiority: {metric} difference > -{rule.margin:g} (one-sided score test with the variance restricted to "
            f"the null and empirical likelihood ratio, {result.unit}s as the unit; the interval inverts them) and "
            f"{field} saving > 0 (sign-flip permutation test and t-test, BCa interval)")
    extra = {"margin": rule.margin, f"{field}_saving": saving.mean_diff, f"{field}_saving_low": saving.low,
             f"{field}_saving_high": saving.high, f"{field}_saving_p_value": saving.p_value, f"{field}_discordant": saving.discordant}
    return ClaimTest(verdict, result, test, extra)


def _noninferior_meaning(rule: DecisionRule, verdict: str, claim: Mapping[str, Any], field: str, adjective: str) -> str:
    margin = rule.margin
    if verdict in ("inconclusive", "no_win"):
        low = claim.get(f"{field}_saving_low")
        saving_low = float(low) if isinstance(low, (int, float)) and not isinstance(low, bool) and np.isfinite(low) else None
        if float(claim.get("low", -1.0)) > -margin:  # then the saving side is what failed
            return f"non-inferior within {margin:g}, but the {field} saving is not shown" + (
                f" (saving CI low {saving_low:+.4f})" if saving_low is not None else "")
        if verdict == "no_win" and float(claim.get("high", 0.0)) < -margin:
            return f"worse by more than {margin:g}"
    return {"win": f"non-inferior within {margin:g} and {adjective}", "equivalent": f"equal within ±{margin:g}",
            "no_win": f"not {adjective}", "inconclusive": f"not shown non-inferior within {margin:g}"}.get(verdict, verdict)


@dataclass(frozen=True)
class _Noninferior(DecisionRule):
    """A rule that ships the front member saving most of one resource whose quality is non-inferior
    to the reference's within the margin; its claim: quality non-inferior and a per-task saving.
    A rule of this kind names its words and its resource, (dev metric, per-task row field)."""

    saves: ClassVar[tuple[str, str]]

    def resource(self) -> tuple[str, str]:
        return self.saves

    def claim(self, baseline: EvalReport, champion: EvalReport, *, metric: str, confidence: float, resamples: int,
              min_effect: float, seed: int) -> ClaimTest:
        return _noninferior_claim(self, baseline, champion, metric=metric, confidence=confidence, resamples=resamples, seed=seed)

    def meaning(self, verdict: str, claim: Mapping[str, Any], *, min_effect: float) -> str:
        return _noninferior_meaning(self, verdict, claim, self.saves[1], self.comparative)

    def win_words(self) -> str:
        return f"{self.comparative} and non-inferior"


@dataclass(frozen=True)
class CheapestNoninferior(_Noninferior):
    """The cheapest front member whose quality is non-inferior to the reference's within the margin;
    the claim: quality non-inferior and a per-task cost saving."""

    name: ClassVar[str] = "cheapest_noninferior"
    comparative: ClassVar[str] = "cheaper"
    superlative: ClassVar[str] = "cheapest"
    saves: ClassVar[tuple[str, str]] = ("cost_per_task", "cost")


@dataclass(frozen=True)
class FastestNoninferior(_Noninferior):
    """The fastest front member (dev p95 latency) whose quality is non-inferior to the reference's
    within the margin; the claim: quality non-inferior and a per-task latency saving."""

    name: ClassVar[str] = "fastest_noninferior"
    comparative: ClassVar[str] = "faster"
    superlative: ClassVar[str] = "fastest"
    saves: ClassVar[tuple[str, str]] = ("latency_p95", "latency")


@dataclass(frozen=True)
class BestQuality(DecisionRule):
    """The best-ranked front member on dev; the claim: it beats the incumbent by more than min_effect."""

    name: ClassVar[str] = "best_quality"

    @property
    def bar(self) -> float | None:
        return None

    @property
    def against_reference(self) -> bool:
        return False

    def claim(self, baseline: EvalReport, champion: EvalReport, *, metric: str, confidence: float, resamples: int,
              min_effect: float, seed: int) -> ClaimTest:
        a, b = paired_scores(baseline, champion, metric=metric)[1:]
        result = quality_test(a, b, null=min_effect, clusters=paired_clusters(baseline, champion), confidence=confidence)
        test = (f"superiority: one-sided score test of mean(champion - baseline) > min_effect with the variance restricted "
                f"to the null, {result.unit}s as the unit; the interval inverts it")
        return ClaimTest(superiority_verdict(result, min_effect=min_effect), result, test, {})

    def meaning(self, verdict: str, claim: Mapping[str, Any], *, min_effect: float) -> str:
        return {"win": f"better by more than {min_effect:g}", "equivalent": f"equal within ±{min_effect:g}: no improvement",
                "no_win": f"not better by more than {min_effect:g}",
                "inconclusive": f"not shown better by more than {min_effect:g}"}.get(verdict, verdict)

    def bound(self, min_effect: float) -> str:
        return f"min_effect {min_effect:g}"

    def quality_bar(self, min_effect: float) -> float:
        return min_effect

    def win_words(self) -> str:
        return "improvement confirmed"

    def check_reference(self, value: str) -> str:
        if value != "incumbent":
            named = " or ".join(f"criteria.decision={r.name}" for r in RULES.values() if r is not BestQuality)
            raise ConfigError("criteria.reference", f"a reference ({value!r}) applies only to {named}",
                              f"drop criteria.reference, or set {named}")
        return value


RULES: Mapping[str, type[DecisionRule]] = {r.name: r for r in (CheapestNoninferior, BestQuality, FastestNoninferior)}
DEFAULT = CheapestNoninferior.name


def decision_rule(name: str, *, margin: float = 0.05, reference: str = "incumbent") -> DecisionRule:
    """The rule ``criteria.decision`` names, with its margin and reference."""
    if name not in RULES:
        raise ConfigError("criteria.decision", f"unknown decision rule {name!r}", f"use one of {list(RULES)}")
    return RULES[name](margin=margin, reference=reference)


def rule_of_record(claim: Mapping[str, Any], decision: Mapping[str, Any]) -> DecisionRule:
    """The rule a written claim (or, without one, a summary's decision) was made under."""
    name = str(claim.get("decision") or decision.get("rule") or BestQuality.name)
    margin = float(claim.get("margin", decision.get("margin", 0.05)))
    return decision_rule(name, margin=margin, reference=str(claim.get("reference") or decision.get("reference") or "incumbent"))
