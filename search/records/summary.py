"""What a finished search prints. The answer first: what to ship and why (the decision and the
holdout claim), the command that ships it, the edits that got there with their authors, and where
the gain comes from. Then the evidence: the Pareto front and the claim's figures. Pure: a summary
in, text out."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.evaluation.decision import rule_of_record
from evoharness.search.records.format import fmt_metric
from evoharness.search.records.headline import headline


def _fmt(metrics: Mapping[str, Any] | None, key: str) -> str:
    return fmt_metric((metrics or {}).get(key), key, missing="-")


def _short(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def ablation_line(rows: Sequence[Mapping[str, Any]], champion_authors: Sequence[str], metric: str) -> str:
    """The printed account: every layer's gain on dev, and the mutators' share of the harness's
    gain (over the champion's own model with the base harness, so a model swap that loses quality
    does not make the share exceed 100%)."""
    parts = [f"{r['layer']} {r['gain']:+.3f}" if r["gain"] is not None else f"{r['layer']} (not measured)" for r in rows]
    harness = [r for r in rows if r["layer"] != "model" and r["gain"] is not None]
    total = sum(max(0.0, r["gain"]) for r in harness)  # a layer that lost quality earns no share
    net = sum(r["gain"] for r in harness)
    mut = next((r["gain"] for r in harness if r["layer"] == "mutator edits"), 0.0)
    who = f" by {', '.join(champion_authors)}" if champion_authors else ""
    if harness and net <= 0:  # a share of a gain that is not there would read as one
        share = f"; over its model with the base harness, the harness changes gained nothing net ({net:+.3f})"
    else:
        share = (f"; over its model with the base harness, the mutators' edits{who} earned {max(0.0, mut) / total:.0%} of the gain"
                 if total > 0 else "")
    return f"Where the dev {metric} gain comes from (one layer at a time from the incumbent): {', '.join(parts) or 'nothing'}{share}"


def answer_lines(summary: Mapping[str, Any]) -> list[str]:
    """The answer block: decision, ship command, the champion's edits and the ablation."""
    q = quality_objective(summary["objectives"])
    champion = summary.get("champion") or {}
    verdict = (summary.get("claim") or {}).get("verdict", "none")
    lines = [f"Decision: {str(summary.get('headline') or headline(summary)).removeprefix('decision ')}"]
    if (summary.get("claim") or {}).get("second_look"):
        lines.append(f"  Second look at the holdout (look {summary['claim'].get('looks')}): read the verdict as weaker than its "
                     "interval says")
    snap = (summary.get("snapshots") or {}).get("champion_path")
    if snap and verdict == "win":
        lines.append(f"  Ship it: evoharness promote {snap} && evoharness compile")
    elif snap:
        lines.append(f"  Not shipped: {snap} is not a win, so `evoharness promote --if-win` leaves it "
                     "(--force would ship an unconfirmed change)")
    else:
        lines.append("  Nothing to ship: the champion is the incumbent itself.")
    rows = champion.get("edits") or []
    if rows:
        width = max(len(r["edit"]) for r in rows)
        lines.append("  Edits (author: why):")
        lines += [f"    {r['edit'].ljust(width)}  {r['author']}" + (f": {_short(r['note'], 90)}" if r.get("note") else "")
                  for r in rows]
    if summary.get("ablation"):
        lines.append("  " + ablation_line(summary["ablation"], champion.get("authors") or [], q))
    return lines


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
    lines = [*answer_lines(summary), ""]
    lines.append(f"Pareto front of study {summary['study']} ({len(summary['front'])} members; * = champion):")
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
    decided = rule_of_record(claim, summary.get("decision") or {})
    win = "improvement confirmed" if decided.bar is None else f"non-inferior and {decided.comparative}"
    word = {"win": win, "equivalent": f"equal within ±{claim.get('min_effect', 0):g}; no improvement claimed"
            }.get(verdict, "no improvement claimed")
    p = claim.get("p_value")
    kept = (summary.get("champion") or {}).get("variant_hash") == base.get("variant_hash")
    if kept:  # the incumbent against itself is no claim: say so instead of a verdict of 0 differences
        lines.append("Holdout: no candidate was claimed; the incumbent stays")
        lines.append(f"Report: {summary['paths'].get('report', '-')}")
        return "\n".join(lines)
    lines.append(
        f"Holdout verdict: {verdict} ({word}); {claim.get('metric', 'score')} difference {claim.get('mean_diff', 0):+.3f}, "
        f"{round(100 * claim.get('confidence', 0.95))}% CI [{claim.get('low', 0):+.3f}, {claim.get('high', 0):+.3f}]"
        f"{f', p = {p:.3g}' if isinstance(p, (int, float)) else ''} over {claim.get('n', 0)} tasks "
        f"({claim.get('discordant', '?')} differ); "
        f"cost/task {claim.get('cost_delta', 0):+.5f} USD, latency p95 {claim.get('latency_delta', 0):+.2f}s"
    )
    lines.append(f"Report: {summary['paths'].get('report', '-')}")
    return "\n".join(lines)


def print_summary(summary: Mapping[str, Any]) -> None:
    print(summary_text(summary), flush=True)
