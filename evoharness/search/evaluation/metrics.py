"""Episode results aggregated into an EvalReport: pure numbers, no I/O.

Rules (SPEC "Evaluation rules"):
- An infrastructure failure is *skipped*: counted in ``skipped``/``skipped_rate`` and in
  ``cost_total``, never scored 0 and never part of a quality, latency or token metric.
- Contract gate: an undelivered episode is scored 0 and not passed, whatever its scorer said.
- A metric that is undefined for the data (no scored episode, no task with two scored samples)
  is *omitted* from ``EvalReport.metrics`` rather than reported as NaN; criteria treat a missing
  metric as unmeasured (see ``evoharness.search.evaluation.criteria``).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evoharness.compiler.runtime.workload import Split
from evoharness.search.evaluation.episode import INPUT_PARTS, EpisodeResult

SCORE_QUANTILES: tuple[float, ...] = (0.10, 0.25, 0.50, 0.75, 0.90)


def quantile_key(q: float, name: str | None = None) -> str:
    """Metric key of a score quantile: 0.9 -> ``score_p90``; named -> ``score_p90.<name>``."""
    key = f"score_p{q * 100:g}"
    return key if name is None else f"{key}.{name}"


@dataclass(frozen=True)
class TaskRow:
    """Per-task summary over the task's scored samples (tasks with none are not listed).

    ``cluster`` is the task's ``Task.cluster`` (the tasks that are one piece of evidence: a
    scenario's variants); left out (or ``""``), it is the task's own id.
    """

    task_id: str
    scored: int  # samples scored (skipped samples excluded)
    pass_fraction: float
    score_mean: float
    score_std: float  # population std (ddof=0) over samples; 0.0 for one sample
    cost_mean: float | None  # None: a sample's route has no price (unpriced)
    latency_mean: float
    named_means: Mapping[str, float] = field(default_factory=dict)
    cluster: str = ""  # the task's cluster; "" means the task's own id

    def __post_init__(self) -> None:
        if not self.cluster:  # a row of a task with no cluster, or read from an eval.json written before clusters
            object.__setattr__(self, "cluster", self.task_id)


@dataclass(frozen=True)
class EvalReport:
    variant_hash: str
    split: Split
    samples: int  # samples per task requested
    episodes: tuple[EpisodeResult, ...]
    metrics: Mapping[str, float]
    tasks: tuple[TaskRow, ...]

    def task(self, task_id: str) -> TaskRow | None:
        return next((row for row in self.tasks if row.task_id == task_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant_hash": self.variant_hash,
            "split": self.split,
            "samples": self.samples,
            "metrics": dict(self.metrics),
            "tasks": [{**asdict(r), "named_means": dict(r.named_means)} for r in self.tasks],
            "episodes": [e.to_dict() for e in self.episodes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalReport:
        return cls(
            variant_hash=data["variant_hash"],
            split=data["split"],
            samples=int(data["samples"]),
            episodes=tuple(EpisodeResult.from_dict(e) for e in data["episodes"]),
            metrics={k: float(v) for k, v in data["metrics"].items()},
            tasks=tuple(
                TaskRow(**{**r, "named_means": dict(r.get("named_means", {}))})
                for r in data["tasks"]
            ),
        )


def _named_values(episodes: Sequence[EpisodeResult], name: str) -> np.ndarray:
    # a sub-score the scorer did not emit for an episode is absent, not 0
    return np.array([e.named[name] for e in episodes if name in e.named], dtype=float)


def score_quantile(
    episodes: Sequence[EpisodeResult], q: float, name: str | None = None
) -> float | None:
    """Quantile ``q`` (numpy 'linear') of scored episodes' score or named sub-score ``name``."""
    scored = [e for e in episodes if e.scored]
    values = (
        np.array([e.score for e in scored], dtype=float)
        if name is None
        else _named_values(scored, name)
    )
    return float(np.quantile(values, q)) if values.size else None


def pair_agreement(passes: Sequence[bool]) -> float:
    """Fraction of unordered sample pairs that share a pass verdict (needs >= 2 samples).

    With k passes out of n: (C(k,2) + C(n-k,2)) / C(n,2). 1.0 = every sample agrees.
    """
    n, k = len(passes), sum(bool(p) for p in passes)
    if n < 2:
        raise ValueError(f"pair agreement needs >= 2 samples, got {n}; skip tasks with fewer")
    return (k * (k - 1) + (n - k) * (n - k - 1)) / (n * (n - 1))


def _task_rows(scored: Sequence[EpisodeResult], clusters: Mapping[str, str]) -> tuple[TaskRow, ...]:
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for e in scored:
        by_task[e.task_id].append(e)
    rows = []
    for task_id in sorted(by_task):
        eps = by_task[task_id]
        scores = np.array([e.score for e in eps], dtype=float)
        names = sorted({n for e in eps for n in e.named})
        rows.append(
            TaskRow(
                task_id=task_id,
                scored=len(eps),
                pass_fraction=float(np.mean([e.passed for e in eps])),
                score_mean=float(scores.mean()),
                score_std=float(scores.std()),
                cost_mean=_mean_cost(eps),
                latency_mean=float(np.mean([e.latency_s for e in eps])),
                named_means={n: float(_named_values(eps, n).mean()) for n in names},
                cluster=clusters.get(task_id, task_id),
            )
        )
    return tuple(rows)


def _quality_metrics(
    scored: Sequence[EpisodeResult], rows: Sequence[TaskRow]
) -> dict[str, float]:
    scores = np.array([e.score for e in scored], dtype=float)
    latency = np.array([e.latency_s for e in scored], dtype=float)
    tool_calls = sum(e.tool_calls for e in scored)
    metrics = {
        "pass_rate": float(np.mean([e.passed for e in scored])),
        "score_mean": float(scores.mean()),
        "score_std": float(scores.std()),
        "task_score_min": min(r.score_mean for r in rows),
        "latency_p50": float(np.quantile(latency, 0.50)),
        "latency_p95": float(np.quantile(latency, 0.95)),
        "tokens_per_task": float(
            np.mean([e.prompt_tokens + e.completion_tokens for e in scored])
        ),
        # no tool call means no tool failure; the rate is still measured
        "tool_failure_rate": sum(e.tool_errors for e in scored) / tool_calls if tool_calls else 0.0,
    }
    cost = _mean_cost(scored)
    if cost is not None:  # an unknown price is no cost at all, not $0: omitted like any unmeasured metric
        metrics["cost_per_task"] = cost
    if all(e.input_parts for e in scored):  # where the tokens go; omitted when an episode was recorded without it
        for part in INPUT_PARTS:
            metrics[f"tokens.{part}"] = float(np.mean([e.input_parts.get(part, 0) for e in scored]))
        # the output of the variant's own route: what the parts leave of the episode's tokens
        metrics["tokens.output"] = float(np.mean([e.prompt_tokens + e.completion_tokens - sum(e.input_parts.values()) for e in scored]))
        # prompt tokens the provider read from its cache: billed at its cache rate, so the prompts' cost is not one
        # price per token and the parts cannot share it by their tokens
        # a stored episode is data: a count that is not a whole number of tokens is not known
        cached = [c if isinstance(c, int) and not isinstance(c, bool) and c >= 0 else None for c in (e.cached_tokens for e in scored)]
        if None not in cached:
            metrics["tokens.cached"] = float(np.mean([c for c in cached if c is not None]))
        inputs = [e.input_cost_usd for e in scored]
        if "cost_per_task" in metrics and None not in inputs:  # what the prompts cost, which the parts share by tokens
            metrics["cost.input"] = float(np.mean([c for c in inputs if c is not None]))
    escalated = [e.escalated_cost_usd for e in scored]
    if any(e.escalations for e in scored) and None not in escalated:  # what the handed-over turns cost, per task
        metrics["cost.escalated"] = float(np.mean([c for c in escalated if c is not None]))
        metrics["escalated_turns"] = float(np.mean([len(e.escalations) for e in scored]))
    for q in SCORE_QUANTILES:
        metrics[quantile_key(q)] = float(np.quantile(scores, q))
    for name in sorted({n for e in scored for n in e.named}):
        metrics[f"score.{name}"] = float(_named_values(scored, name).mean())
        metrics[f"task_score_min.{name}"] = min(
            r.named_means[name] for r in rows if name in r.named_means
        )
    return metrics


def _mean_cost(episodes: Sequence[EpisodeResult]) -> float | None:
    costs = [e.cost_usd for e in episodes]
    return None if None in costs else float(np.mean([c for c in costs if c is not None]))


def _determinism(scored: Sequence[EpisodeResult]) -> float | None:
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for e in scored:
        verdicts[e.task_id].append(e.passed)
    agreements = [pair_agreement(v) for v in verdicts.values() if len(v) >= 2]
    return float(np.mean(agreements)) if agreements else None


def aggregate(
    episodes: Sequence[EpisodeResult], *, variant_hash: str, split: Split, samples: int,
    stand_ins: Sequence[EpisodeResult] = (), clusters: Mapping[str, str] | None = None,
) -> EvalReport:
    """Summarise one variant's episodes on one split (see the module docstring for the rules).

    Metric keys: pass_rate, score_mean, score_std, score_p10/p25/p50/p75/p90, score.<name>,
    task_score_min (the lowest per-task mean score) and task_score_min.<name>, latency_p50,
    latency_p95, cost_per_task, tokens_per_task, tokens.<part> (input tokens per task by part:
    system, tools, tool_results, history; escalated: the escalated calls' input and output; and the
    own route's output), cost.input (what the prompts of the
    calls on the variant's own route cost per task, when every call's share is known), cost.escalated
    and escalated_turns (per task, when any turn was handed to an escalation route), tool_failure_rate, determinism — over scored
    episodes, omitted when none is scored (determinism: when no task has two scored samples).
    Quantiles use numpy's 'linear' method; stds are population stds (ddof=0).
    Always present: episodes, scored, skipped, skipped_rate, undelivered (scored episodes that
    failed the contract gate), and over every episode, skipped ones included: safety_violations
    (a forbidden write happened even if the episode later failed), unpriced_episodes (episodes
    whose cost is unknown: a call on a route with no price), cost_total (the money the run costs
    uncached) and billed_cost (what this run paid: replies the response cache answered are free),
    both omitted, with cost_per_task, when any episode is unpriced, billed_tokens, attempts
    (provider attempts, retries included) and infra_seconds (time lost to failed attempts and
    backoff; latency metrics count successful attempts only), and samples_skipped (repeat samples
    not run because the measured repeats were identical; see evaluate).

    ``stand_ins`` are those unrun samples, each a copy of its task's run sample: the quality,
    cost-per-task and latency metrics and the task rows weigh every task by the samples asked
    for, as if they had run, while the counters (episodes, cost_total, attempts) and determinism
    count only what ran and was paid.

    ``clusters`` maps a task id to its ``Task.cluster`` (the evaluator knows the tasks; an episode
    names only its task id); a task it does not name is its own cluster.
    """
    if samples < 1:
        raise ValueError(f"samples={samples} must be >= 1 (samples per task requested)")
    scored = [e for e in episodes if e.scored]
    weighed = scored + [e for e in stand_ins if e.scored]
    rows = _task_rows(weighed, clusters or {})
    metrics = _quality_metrics(weighed, rows) if weighed else {}
    determinism = _determinism(scored)
    if determinism is not None:
        metrics["determinism"] = determinism
    skipped = len(episodes) - len(scored)
    unpriced = sum(1 for e in episodes if e.cost_usd is None)
    if not unpriced:
        metrics.update(
            cost_total=float(sum(e.cost_usd or 0.0 for e in episodes)),
            # what this run paid: a call the response cache answered costs nothing again (cost_total is
            # what the run would have cost uncached, the figure the objectives and claims compare)
            billed_cost=float(sum((e.cost_usd or 0.0) if e.billed_cost_usd is None else e.billed_cost_usd for e in episodes)),
        )
    metrics.update(
        unpriced_episodes=float(unpriced),
        episodes=float(len(episodes)),
        scored=float(len(scored)),
        skipped=float(skipped),
        skipped_rate=skipped / len(episodes) if episodes else 0.0,
        undelivered=float(sum(1 for e in scored if not e.delivered)),
        safety_violations=float(sum(e.safety_violations for e in episodes)),
        billed_tokens=float(sum(e.prompt_tokens + e.completion_tokens if e.billed_tokens is None else e.billed_tokens
                                for e in episodes)),
        attempts=float(sum(e.attempts for e in episodes)),
        infra_seconds=float(sum(e.infra_s for e in episodes)),
        samples_skipped=float(len(stand_ins)),
    )
    return EvalReport(
        variant_hash=variant_hash,
        split=split,
        samples=samples,
        episodes=tuple(episodes),
        metrics=dict(sorted(metrics.items())),
        tasks=rows,
    )


def paired_scores(
    a: EvalReport, b: EvalReport, *, metric: str = "score_mean"
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Per-task means of ``metric`` (``pass_rate``: the share of samples that passed; else the
    score) over the tasks scored in both reports, in task_id order.

    A task skipped entirely in either report drops out of the pairing rather than counting
    as 0 for that side.
    """
    a_rows = {r.task_id: r for r in a.tasks}
    b_rows = {r.task_id: r for r in b.tasks}
    task_ids = tuple(sorted(a_rows.keys() & b_rows.keys()))
    def value(row: TaskRow) -> float:
        if metric == "pass_rate":
            return row.pass_fraction
        if metric == "cost_per_task":
            return float("nan") if row.cost_mean is None else row.cost_mean  # unpriced: no comparison holds
        if metric.startswith("score.") and metric[len("score."):] in row.named_means:
            return float(row.named_means[metric[len("score."):]])
        return row.score_mean

    a_means = np.array([value(a_rows[t]) for t in task_ids], dtype=float)
    b_means = np.array([value(b_rows[t]) for t in task_ids], dtype=float)
    return task_ids, a_means, b_means


def paired_clusters(a: EvalReport, b: EvalReport) -> tuple[str, ...]:
    """The cluster of each task ``paired_scores(a, b)`` pairs, in its order (task ids scored in
    both reports, sorted): ``tasks, x, y = paired_scores(a, b); clusters = paired_clusters(a, b)``.

    Raises:
        ValueError: a task's cluster differs between the reports (they were run on different
            clusterings of the workload, so they cannot be paired cluster by cluster).
    """
    a_rows = {r.task_id: r for r in a.tasks}
    b_rows = {r.task_id: r for r in b.tasks}
    task_ids = sorted(a_rows.keys() & b_rows.keys())
    for t in task_ids:
        if a_rows[t].cluster != b_rows[t].cluster:
            raise ValueError(f"task {t} is in cluster {a_rows[t].cluster!r} in one report ({a.variant_hash[:12]}) and "
                             f"{b_rows[t].cluster!r} in the other ({b.variant_hash[:12]}); pair reports of one clustering")
    return tuple(a_rows[t].cluster for t in task_ids)
