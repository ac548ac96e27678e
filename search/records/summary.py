"""What a finished search prints: the front, the verdict and where the records are."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search.evaluation.criteria import quality_objective
from search.records.format import fmt_metric
from search.records.headline import headline


def _fmt(metrics: Mapping[str, Any] | None, key: str) -> str:
    return fmt_metric((metrics or {}).get(key), key, missing="-")


def _short(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def summary_text(summary: Mapping[str, Any]) -> str:
    objectives = [o["metric"] for o in summary["objectives"]]
    q = quality_objective(summary["objectives"])
    head = ["", "trial", "round", *[f"train {m}" for m in objectives], f"dev {q}", "changes (authors)"]
    rows = [head]
    base = summary["baseline"]
    rows.append(["", "base", "-", *[_fmt(base.get("train"), m) for m in objectives], _fmt(base.get("dev"), q), "baseline"])
    for m in summary["front"]:
        rows.append(["*" if m.get("champion") else "", str(m["trial"]), str(m["round"]), *[_fmt(m.get("train"), k) for k in objectives],
                     _fmt(m.get("dev"), q), _short(m.get("changes") or ", ".join(m.get("authors") or []) or "-")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"Pareto front of study {summary['study']} ({len(summary['front'])} members; * = champion):"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    base_dev = (base.get("dev") or {}).get(q)
    cheaper = [m for m in summary["front"] if m.get("dev") and base_dev is not None and m["dev"].get(q, 0) > base_dev]
    if cheaper:
        m = min(cheaper, key=lambda m: m["dev"].get("cost_per_task", float("inf")))
        lines.append(
            f"Cheapest member beating the baseline on dev: trial {m['trial']} (round {m['round']}: {_short(m.get('changes') or '-', 60)}), "
            f"dev {q} {_fmt(m['dev'], q)} at {_fmt(m['dev'], 'cost_per_task')}/task "
            f"(baseline {_fmt(base.get('dev'), q)} at {_fmt(base.get('dev'), 'cost_per_task')})"
        )
    claim = summary.get("claim") or {}
    verdict = claim.get("verdict", "none")
    word = {"win": "improvement confirmed", "equivalent": f"equal within ±{claim.get('min_effect', 0):g}; no improvement claimed"
            }.get(verdict, "no improvement claimed")
    p = claim.get("p_value")
    if claim.get("second_look"):
        lines.append(f"Second look at the holdout (look {claim.get('looks')}): read the verdict as weaker than its interval says")
    lines.append(f"Decision: {summary.get('headline') or headline(summary)}")
    lines.append(
        f"Holdout verdict: {verdict} ({word}); {claim.get('metric', 'score')} difference {claim.get('mean_diff', 0):+.3f}, "
        f"{round(100 * claim.get('confidence', 0.95))}% CI [{claim.get('low', 0):+.3f}, {claim.get('high', 0):+.3f}]"
        f"{f', p = {p:.3g}' if isinstance(p, (int, float)) else ''} over {claim.get('n', 0)} tasks "
        f"({claim.get('discordant', '?')} differ); "
        f"cost/task {claim.get('cost_delta', 0):+.5f} USD, latency p95 {claim.get('latency_delta', 0):+.2f}s"
    )
    snap = (summary.get("snapshots") or {}).get("champion_path")
    if snap and verdict == "win":
        lines.append(f"Champion snapshot: {snap}  (ship it: evoharness promote {snap} && evoharness compile)")
    elif snap:
        lines.append(f"Champion snapshot: {snap}  (not a win: `evoharness promote --if-win` leaves it; "
                     "--force would ship an unconfirmed change)")
    else:
        lines.append("Champion is the baseline itself: nothing to promote.")
    lines.append(f"Report: {summary['paths'].get('report', '-')}")
    return "\n".join(lines)


def print_summary(summary: Mapping[str, Any]) -> None:
    print(summary_text(summary), flush=True)
