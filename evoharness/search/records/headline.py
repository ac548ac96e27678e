"""The one line a finished search answers its question with: the decision rule, what ships (or
that the incumbent stays), its holdout quality against the incumbent with the interval, and what
it does to cost and latency. Pure: a summary in, a sentence out."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evoharness.search.evaluation.decision import rule_of_record
from evoharness.search.records.outcome import ABSENT, Claim, Decision, Member, SearchOutcome, as_dict, present


def _change(new: float | None, old: float | None) -> str:
    if new is None or old is None:
        return "n/a"
    if old == 0:
        return "+0%" if new == 0 else "n/a (compared with 0)"
    return f"{100 * (new - old) / old:+.0f}%"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def headline(summary: SearchOutcome | Mapping[str, Any]) -> str:
    o = SearchOutcome.of(summary)
    # a hand-made or degenerate summary may hold null where a record belongs: read it as absent
    champion: Member = o.champion or ABSENT
    made: Claim = o.claim or ABSENT
    chose: Decision = o.decision or ABSENT
    baseline: Member = o.baseline or ABSENT
    claim, decision = as_dict(made), as_dict(chose)
    decided = rule_of_record(claim, decision)
    rule, margin, min_effect = decided.name, decided.margin, float(present(made.min_effect, 0.0))
    bound = decided.bound(min_effect)
    verdict = str(present(made.verdict, "none"))
    metric = str(present(made.metric, "pass_rate"))
    base = o.reference or baseline
    against = f"the reference ({base.name})" if base.name else "the incumbent"
    hold_c, hold_b = present(champion.holdout, {}), present(base.holdout, {})
    changes = champion.changes or "baseline"
    if champion.variant_hash == baseline.variant_hash or changes == "baseline":
        if chose.evidence == "none":
            return (f"decision {rule} ({bound}): keep the incumbent; no front member is {decided.comparative} than {against} and within "
                    f"{margin:g} of its dev quality, so no candidate was claimed and the holdout stays sealed")
        return f"decision {rule} ({bound}): keep the incumbent; no front member beats it on dev"
    q_c, q_b = _num(hold_c.get(metric)), _num(hold_b.get(metric))
    quality = (f"holdout {metric} {q_c:.3f} vs {q_b:.3f} for {against}" if q_c is not None and q_b is not None
               else f"holdout {metric}")
    pct = int(round(100 * float(present(made.confidence, 0.95))))
    meaning = decided.meaning(verdict, claim, min_effect=min_effect)
    mean_diff, low, high = (float(present(v, 0.0)) for v in (made.mean_diff, made.low, made.high))
    clustered = made.unit == "cluster"
    over = f" over {made.clusters} clusters" if clustered else ""
    interval = f"({mean_diff:+.3f}, {pct}% CI {low:+.3f}..{high:+.3f}{over}: {meaning})"
    c_c, c_b = _num(hold_c.get("cost_per_task")), _num(hold_b.get("cost_per_task"))
    cost = f"cost/task {_change(c_c, c_b)}" + (f" (${c_c:.4f} vs ${c_b:.4f})" if c_c is not None and c_b is not None else "")
    latency = f"latency p95 {_change(_num(hold_c.get('latency_p95')), _num(hold_b.get('latency_p95')))}"
    second = " (second look at the holdout)" if made.second_look else ""
    if made.underpowered:
        second += " (underpowered: the splits cannot show this within the margin; run under search.allow_underpowered)"
    # the claim needs the interval's low end above the bar: what it lacks is mean - low vs mean - bar
    half = mean_diff - low
    room = mean_diff - decided.quality_bar(min_effect)
    quality_undecided = low <= decided.quality_bar(min_effect)
    if verdict == "inconclusive" and quality_undecided and room > 0 and half > room:
        # an interval narrows as 1/sqrt(n): how many tasks would decide it if the difference holds
        units = f"{made.clusters} clusters" if clustered else f"{present(made.n, '?')} tasks"
        second += (f"; too few holdout tasks to decide: if the observed difference is real, about {(half / room) ** 2:.1f}x "
                   f"the {units} would (the interval's lower arm would need to be {room:.3f}, not {half:.3f})")
    if verdict == "win":
        action = f"ship {changes}"
    else:
        action = f"keep the incumbent: {changes} is not confirmed"
    return f"decision {rule} ({bound}): {action}; {quality} {interval}, {cost}, {latency}; verdict {verdict}{second}"
