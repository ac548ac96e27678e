"""Optimisation criteria: the config schema, validation, and the verdict on an EvalReport.

Rules, documented once:
- Each kind reads one metric of ``EvalReport.metrics`` and has a direction (``_KINDS``).
  A criterion is *satisfied* when the metric is at or beyond its threshold (boundary included,
  with a 1e-9 float tolerance). A metric missing from the report (e.g. ``determinism`` with one
  sample per task, anything when every episode was skipped) is unmeasured: not satisfied,
  margin -1.
- Normalised margin: bounded kinds (rates and scores in [0, 1]) use the absolute distance
  ``value - threshold`` (sign flipped for minimised kinds); latency and cost use the relative
  distance ``(threshold - value) / threshold``. Positive = satisfied with room to spare.
- ``weighted_score`` = weight-averaged margin of every judged criterion, each margin clipped to
  [-1, 1]; it is monotone in every metric (better metric, never lower score).
- ``feasible`` = no hard criterion violated. ``passed``: aggregation ``all`` = every criterion
  satisfied; ``weighted`` = feasible and weighted_score >= 0. An infeasible verdict never passes:
  a hard criterion cannot be bought back by soft surplus.
- A criterion with ``objective: true`` and no threshold only steers the search (it is an
  objective, never judged).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import CriteriaConfig, CriterionConfig
from evoharness.search.evaluation.metrics import EvalReport, quantile_key, score_quantile

Direction = Literal["maximize", "minimize"]
AGGREGATIONS = ("all", "weighted")
SCOPES = ("any", "by_name")
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class _KindSpec:
    metric: str  # EvalReport.metrics key (score_quantile: replaced by the quantile's key)
    direction: Direction
    bounded: bool  # metric lives in [0, 1] -> absolute margins; else relative to threshold
    named: bool  # scope by_name allowed (reads the named sub-score's variant of the metric)


_KINDS: dict[str, _KindSpec] = {
    "pass_rate": _KindSpec("pass_rate", "maximize", bounded=True, named=False),
    "score_floor": _KindSpec("task_score_min", "maximize", bounded=True, named=True),
    "score_mean": _KindSpec("score_mean", "maximize", bounded=True, named=True),
    "score_quantile": _KindSpec("score_p", "maximize", bounded=True, named=True),
    "latency_p95": _KindSpec("latency_p95", "minimize", bounded=False, named=False),
    "cost_ceiling": _KindSpec("cost_per_task", "minimize", bounded=False, named=False),
    "determinism": _KindSpec("determinism", "maximize", bounded=True, named=False),
    "tool_failure_rate": _KindSpec("tool_failure_rate", "minimize", bounded=True, named=False),
}
KINDS: tuple[str, ...] = tuple(_KINDS)


@dataclass(frozen=True)
class OptimisationCriterion:
    name: str
    kind: str
    metric: str  # EvalReport.metrics key this criterion reads
    direction: Direction
    threshold: float | None  # None = objective only, never judged
    weight: float = 1.0
    hard: bool = False
    objective: bool = False
    quantile: float | None = None
    score_name: str | None = None

    @property
    def judged(self) -> bool:
        return self.threshold is not None


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: Direction


DEFAULT_OBJECTIVES: tuple[Objective, ...] = (
    Objective("score_mean", "maximize"),
    Objective("cost_per_task", "minimize"),
    Objective("latency_p95", "minimize"),
)


@dataclass(frozen=True)
class CriterionResult:
    name: str
    metric: str
    value: float | None  # None = metric missing from the report (unmeasured)
    threshold: float
    satisfied: bool
    margin: float  # normalised, unclipped; >= 0 when satisfied (up to tolerance)
    hard: bool
    weight: float


@dataclass(frozen=True)
class CriteriaVerdict:
    aggregation: str
    results: tuple[CriterionResult, ...]
    hard_violations: tuple[str, ...]  # names of violated hard criteria
    feasible: bool
    passed: bool
    weighted_score: float  # in [-1, 1]; 0.0 when nothing is judged
    objectives: tuple[Objective, ...]  # what rank_key breaks ties on

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fail(path: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(path, problem, fix)


def _structured(schema: type, data: Any, path: str) -> Any:
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), data))
    except OmegaConfBaseException as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(path, first, f"use the fields of {schema.__name__} in compiler/schema.py") from None


def _as_config(cfg: CriteriaConfig | DictConfig | Mapping[str, Any], path: str) -> CriteriaConfig:
    if isinstance(cfg, CriteriaConfig):
        return cfg
    data = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    # entries are converted one by one so that an error can name the entry's index
    entries = data.get("criteria") or []
    top = {k: v for k, v in data.items() if k != "criteria"}
    config = _structured(CriteriaConfig, top, path)
    assert isinstance(config, CriteriaConfig)
    config.criteria = [
        _structured(CriterionConfig, entry, f"{path}.criteria[{i}]")
        for i, entry in enumerate(entries)
    ]
    return config


def _metric_key(kind: str, spec: _KindSpec, c: CriterionConfig) -> str:
    if kind == "score_quantile":
        assert c.quantile is not None
        return quantile_key(c.quantile, c.score_name)
    if c.score_name is None:
        return spec.metric
    return f"score.{c.score_name}" if kind == "score_mean" else f"{spec.metric}.{c.score_name}"


def _build_one(c: CriterionConfig, path: str) -> OptimisationCriterion:
    spec = _KINDS.get(c.kind)
    if spec is None:
        raise _fail(f"{path}.kind", f"{c.kind!r} is not a criterion kind", f"use one of {KINDS}")
    if c.scope not in SCOPES:
        raise _fail(f"{path}.scope", f"{c.scope!r} is not a scope", f"use one of {SCOPES}")
    if c.scope == "by_name" and not spec.named:
        raise _fail(f"{path}.scope", f"'by_name' does not apply to kind {c.kind!r}",
                    "use scope: any, or score_floor / score_mean / score_quantile")
    if c.scope == "by_name" and not c.score_name:
        raise _fail(f"{path}.score_name", f"missing ({c.score_name!r}) with scope: by_name",
                    "set score_name to a named sub-score the scorer emits")
    if c.scope == "any" and c.score_name is not None:
        raise _fail(f"{path}.score_name", f"{c.score_name!r} is set but scope is 'any'",
                    "set scope: by_name, or remove score_name")
    if c.kind == "score_quantile":
        if c.quantile is None or not 0.0 <= c.quantile <= 1.0:
            raise _fail(f"{path}.quantile", f"{c.quantile!r} is not in [0, 1]",
                        "set quantile: 0.1 for the 10th percentile score")
    elif c.quantile is not None:
        raise _fail(f"{path}.quantile", f"{c.quantile!r} is set on kind {c.kind!r}",
                    "remove quantile; it only applies to score_quantile")
    if not (math.isfinite(c.weight) and c.weight > 0):
        raise _fail(f"{path}.weight", f"{c.weight!r} is not a positive number", "use e.g. 1.0")
    t = c.threshold
    if t is None:
        if not c.objective or c.hard:
            raise _fail(f"{path}.threshold", f"missing for kind {c.kind!r}",
                        "set a threshold, or make it objective-only (objective: true, hard: false)")
    elif not math.isfinite(t):
        raise _fail(f"{path}.threshold", f"{t!r} is not finite", "use a finite number")
    elif spec.bounded and not 0.0 <= t <= 1.0:
        raise _fail(f"{path}.threshold", f"{t!r} is outside [0, 1] for {c.kind!r}",
                    "rates and scores are fractions: use e.g. 0.5")
    elif not spec.bounded and t <= 0:
        raise _fail(f"{path}.threshold", f"{t!r} must be > 0 for {c.kind!r}",
                    "give seconds (latency_p95) or USD per task (cost_ceiling)")
    default_name = c.kind if c.score_name is None else f"{c.kind}:by_name:{c.score_name}"
    return OptimisationCriterion(
        name=c.name or default_name,
        kind=c.kind,
        metric=_metric_key(c.kind, spec, c),
        direction=spec.direction,
        threshold=None if t is None else float(t),
        weight=float(c.weight),
        hard=c.hard,
        objective=c.objective,
        quantile=c.quantile,
        score_name=c.score_name,
    )


def build_criteria(
    cfg: CriteriaConfig | DictConfig | Mapping[str, Any], *, path: str = "criteria"
) -> tuple[OptimisationCriterion, ...]:
    """Validate a criteria config; errors name the field (``criteria.criteria[2].kind``)."""
    config = _as_config(cfg, path)
    if config.aggregation not in AGGREGATIONS:
        raise _fail(f"{path}.aggregation", f"{config.aggregation!r} is not an aggregation",
                    f"use one of {AGGREGATIONS}")
    built: list[OptimisationCriterion] = []
    for i, c in enumerate(config.criteria):
        criterion = _build_one(c, f"{path}.criteria[{i}]")
        if any(b.name == criterion.name for b in built):
            raise _fail(f"{path}.criteria[{i}].name", f"{criterion.name!r} is used twice",
                        "give each criterion a unique name")
        built.append(criterion)
    return tuple(built)


def _margin(c: OptimisationCriterion, value: float) -> float:
    assert c.threshold is not None
    diff = value - c.threshold if c.direction == "maximize" else c.threshold - value
    return diff if _KINDS[c.kind].bounded else diff / c.threshold


def _measure(source: EvalReport | Mapping[str, float], c: OptimisationCriterion) -> float | None:
    metrics = source.metrics if isinstance(source, EvalReport) else source
    if c.metric in metrics:
        return float(metrics[c.metric])
    # arbitrary quantiles are not pre-aggregated; a full report can still compute them
    if isinstance(source, EvalReport) and c.kind == "score_quantile" and c.quantile is not None:
        return score_quantile(source.episodes, c.quantile, c.score_name)
    return None


def _judge(source: EvalReport | Mapping[str, float], c: OptimisationCriterion) -> CriterionResult:
    assert c.threshold is not None
    value = _measure(source, c)
    margin = -1.0 if value is None else _margin(c, value)
    tolerance = _TOLERANCE * max(1.0, abs(c.threshold))
    satisfied = value is not None and (
        value >= c.threshold - tolerance
        if c.direction == "maximize"
        else value <= c.threshold + tolerance
    )
    return CriterionResult(c.name, c.metric, value, c.threshold, satisfied, margin, c.hard, c.weight)


def evaluate_criteria(
    source: EvalReport | Mapping[str, float],
    criteria: Sequence[OptimisationCriterion],
    aggregation: str = "all",
) -> CriteriaVerdict:
    """Judge a report (or its metrics mapping) against criteria; rules in the module doc."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation={aggregation!r} is unknown; use one of {AGGREGATIONS}")
    results = tuple(_judge(source, c) for c in criteria if c.judged)
    hard_violations = tuple(r.name for r in results if r.hard and not r.satisfied)
    total_weight = sum(r.weight for r in results)
    weighted = (
        sum(r.weight * min(1.0, max(-1.0, r.margin)) for r in results) / total_weight
        if total_weight
        else 0.0
    )
    feasible = not hard_violations
    if aggregation == "all":
        passed = all(r.satisfied for r in results)
    else:
        passed = feasible and weighted >= 0.0
    return CriteriaVerdict(
        aggregation=aggregation,
        results=results,
        hard_violations=hard_violations,
        feasible=feasible,
        passed=passed,
        weighted_score=weighted,
        objectives=objectives(criteria),
    )


def objectives(criteria: Sequence[OptimisationCriterion]) -> tuple[Objective, ...]:
    """Search objectives: criteria flagged ``objective`` (first per metric wins), in order;
    DEFAULT_OBJECTIVES (quality up, cost down, latency down) when none is flagged."""
    chosen: dict[str, Objective] = {}
    for c in criteria:
        if c.objective and c.metric not in chosen:
            chosen[c.metric] = Objective(c.metric, c.direction)
    return tuple(chosen.values()) or DEFAULT_OBJECTIVES


def quality_objective(chosen: Sequence[Objective | Mapping[str, Any]]) -> str:
    """The quality metric every reader of a front ranks by: the first maximised objective
    (objectives as built here, or as recorded in a summary); ``score_mean`` when none is."""
    for o in chosen:
        metric, direction = (o.metric, o.direction) if isinstance(o, Objective) else (o.get("metric"), o.get("direction"))
        if direction == "maximize":
            return str(metric)
    return "score_mean"


def constraint_values(verdict: CriteriaVerdict) -> tuple[float, ...]:
    """One value per hard criterion, Optuna convention (<= 0 feasible): the normalised
    shortfall ``-margin``; 0.0 for a boundary hit, 1.0 for an unmeasured metric."""
    values = []
    for r in verdict.results:
        if not r.hard:
            continue
        if r.value is None:
            values.append(1.0)
        elif r.satisfied:
            values.append(min(-r.margin, 0.0))
        else:
            values.append(max(-r.margin, _TOLERANCE))
    return tuple(values)


def rank_key(verdict: CriteriaVerdict, metrics: Mapping[str, float]) -> tuple[float, ...]:
    """Sort key for choosing a champion; larger is better (``max(..., key=...)``).

    Order: feasible, then passed, then weighted_score, then each of ``verdict.objectives`` in
    turn, oriented so that larger is better; a missing objective metric ranks last (-inf).
    """
    tie_breaks = []
    for o in verdict.objectives:
        value = metrics.get(o.metric)
        if value is None or math.isnan(value):
            tie_breaks.append(-math.inf)
        else:
            tie_breaks.append(float(value) if o.direction == "maximize" else -float(value))
    return (float(verdict.feasible), float(verdict.passed), verdict.weighted_score, *tie_breaks)


def objective_values(
    source: EvalReport, criteria: Sequence[OptimisationCriterion], chosen: Sequence[Objective]
) -> tuple[float | None, ...]:
    """The objectives' values on a report, measured as the criteria measure them (so a quantile
    that is not pre-aggregated is computed from the episodes); None when unmeasurable."""
    by_metric = {c.metric: c for c in reversed(criteria)}
    out: list[float | None] = []
    for o in chosen:
        c = by_metric.get(o.metric)
        value = _measure(source, c) if c is not None else source.metrics.get(o.metric)
        out.append(None if value is None else float(value))
    return tuple(out)
