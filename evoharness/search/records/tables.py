"""Plain-text tables for the terminal."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from evoharness.search.evaluation.metrics import EvalReport
from evoharness.search.records.format import UNPRICED, fmt_metric

HEADLINE = ("pass_rate", "score_mean", "score_std", "latency_p50", "latency_p95", "cost_per_task", "tokens_per_task", "tool_failure_rate",
            "determinism", "skipped", "undelivered", "safety_violations")
# shown under the headline only when a report has them: a variant that hands troubled turns to another route
ESCALATION = ("cost.escalated", "escalated_turns")


def missing(metrics: Mapping[str, float | None], key: str) -> str:
    """What stands in for an absent metric: "unpriced" for a cost no price was known for (never $0)."""
    return UNPRICED if key.startswith("cost") and metrics.get("unpriced_episodes") else "-"


def metrics_table(rows: Sequence[tuple[str, EvalReport]], keys: Sequence[str] = HEADLINE) -> str:
    """One column per (label, report), one line per metric (the headline's adds the escalation
    metrics when a report escalated)."""
    if keys is HEADLINE:
        keys = (*keys, *(k for k in ESCALATION if any(r.metrics.get(k) for _, r in rows)))
    labels = [label for label, _ in rows]
    width = max([len(k) for k in keys] + [6])
    cols = [max(len(label), 12) for label in labels]
    lines = [" " * width + "  " + "  ".join(label.rjust(c) for label, c in zip(labels, cols))]
    for key in keys:
        values: list[Mapping[str, float]] = [r.metrics for _, r in rows]
        lines.append(key.ljust(width) + "  " + "  ".join(fmt_metric(v.get(key), key, missing=missing(v, key)).rjust(c)
                                                         for v, c in zip(values, cols)))
    return "\n".join(lines)
