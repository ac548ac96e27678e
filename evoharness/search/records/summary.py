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
from evoharness.search.records.outcome import ABSENT, SearchOutcome, as_dict, present


def _fmt(metrics: Mapping[str, Any] | None, key: str) -> str:
    return fmt_metric((metrics or {}).get(key), key, missing="-")


def _short(text: str, width: int = 100) -> str:
    """``text`` up to ``width`` characters, cut at a word's end (a name is never shown half)."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "…"


# dev metrics that a shipped change can make worse while its objectives improve: (metric, higher is worse)
WATCHED = (("pass_rate", False), ("tool_failure_rate", True), ("tokens_per_task", True), ("cost_per_task", True),
           ("latency_p95", True))


def worse_line(champion: Mapping[str, Any], incumbent: Mapping[str, Any]) -> str | None:
    """What the champion does worse than the incumbent on dev, by the watched metrics; None when nothing."""
    parts = []
    for metric, higher_is_worse in WATCHED:
        new, old = champion.get(metric), incumbent.get(metric)
        if not isinstance(new, (int, float)) or not isinstance(old, (int, float)) or new == old or (new > old) != higher_is_worse:
            continue
        rel = f" ({100 * (new - old) / old:+.0f}%)" if old else ""
        parts.append(f"{metric} {fmt_metric(old, metric)} -> {fmt_metric(new, metric)}{rel}")
    return f"  Worse than the incumbent on dev: {'; '.join(parts)}" if parts else None


def _answer(o: SearchOutcome) -> str:
    """The verdict in one short line: what to do, and which variant that is."""
    champion, base, claim = o.champion or ABSENT, o.baseline or ABSENT, o.claim or ABSENT
    kept = f"keep the incumbent (variant {str(base.variant_hash)[:12]})"
    if champion.variant_hash == base.variant_hash:
        return f"Answer: {kept}; no candidate qualified, nothing ships"
    who = f"trial {champion.trial} (variant {str(champion.variant_hash)[:12]})"
    verdict = present(claim.verdict, "none")
    if verdict == "win":
        return f"Answer: ship {who}: a win on the sealed holdout"
    return f"Answer: {kept}; the champion, {who}, did not win on the holdout (verdict {verdict})"


def _spend(o: SearchOutcome) -> str:
    spend = dict(o.spend or {})
    spent, projected, cap = (spend.get(k) for k in ("spent_usd", "projected_usd", "budget_usd"))
    line = f"  Spent: {fmt_metric(spent, 'cost', missing='?')}"
    if isinstance(projected, (int, float)):
        line += f", against a projection of at most {fmt_metric(projected, 'cost')}"
    if isinstance(cap, (int, float)):
        line += f" (search.budget_usd={cap:g}" + (f", reached in round {spend['capped_in_round']})" if spend.get("capped_in_round")
                                                  is not None else ")")
    return line


PARTS = (("system", "system prompt"), ("tools", "tool schemas"), ("tool_results", "tool results"), ("history", "history"),
         ("escalated", "escalated calls (in and out)"), ("output", "output"))


def named_part(key: str) -> str:
    return dict(PARTS)[key]


def part_costs(dev: Mapping[str, Any]) -> dict[str, float] | None:
    """Cost per task by part (PARTS' keys): the prompts' cost shared among the input parts by their
    tokens (one route bills every prompt token at one price), the output, and the escalated calls;
    None when the evaluation did not record what its prompts cost, or when some prompt tokens were
    billed at a provider's cache rate (or it is not known whether any were): those cost less than the
    rest, and which parts they were is not known, so a split by tokens would misplace the discount."""
    cached = dev.get("tokens.cached")
    if not isinstance(cached, (int, float)) or cached != 0:  # some prompt tokens at a cache rate, or not known
        return None
    found = {key: dev.get(key) for key in ("cost_per_task", "cost.input", "tokens.system", "tokens.tools", "tokens.tool_results",
                                           "tokens.history")}
    if not all(isinstance(v, (int, float)) for v in found.values()):
        return None
    total, prompts, *own = (float(v) for v in found.values() if isinstance(v, (int, float)))
    tokens = sum(own)
    if prompts and not tokens:  # prompts paid for with no tokens to share them by: the split is not known
        return None
    out = {key: prompts * v / tokens if tokens else 0.0 for key, v in zip(("system", "tools", "tool_results", "history"), own)}
    handed = dev.get("cost.escalated")
    out["escalated"] = float(handed) if isinstance(handed, (int, float)) else 0.0
    # the rest is the own route's output; a record whose parts exceed its total is not split at all
    rest = total - prompts - out["escalated"]
    if rest < -1e-9 * max(1.0, total):
        return None
    out["output"] = round(max(0.0, rest), 12)
    return out


def tokens_line(label: str, dev: Mapping[str, Any]) -> str | None:
    """Where one variant's tokens per task go on dev, by part, largest first, with what each part
    cost when the evaluation recorded it; None when it was recorded without the parts."""
    raw = {name: dev.get(f"tokens.{key}") for key, name in PARTS}
    total = dev.get("tokens_per_task")
    if not isinstance(total, (int, float)) or not total or not all(isinstance(v, (int, float)) for v in raw.values()):
        return None
    costs = part_costs(dev)
    named = {name: key for key, name in PARTS}

    def part(name: str, v: float) -> str:
        dollars = f", {fmt_metric(costs[named[name]], 'cost_per_task')}" if costs is not None else ""
        return f"{name} {v:,.0f} ({v / total:.0%}{dollars})"

    parts = {name: float(v) for name, v in raw.items() if isinstance(v, (int, float))}
    shown = ", ".join(part(name, v) for name, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v or name != named_part("escalated"))
    cost, handed = dev.get("cost_per_task"), dev.get("cost.escalated")
    price = f" at {fmt_metric(cost, 'cost_per_task')}" if isinstance(cost, (int, float)) else ""
    if isinstance(handed, (int, float)) and handed and costs is None:
        price += f" ({fmt_metric(handed, 'cost_per_task')} of it on escalated calls)"
    cached, prompts = dev.get("tokens.cached"), dev.get("cost.input")
    if isinstance(prompts, (int, float)) and costs is None:
        paid = f"the prompts' {fmt_metric(prompts, 'cost_per_task')} is not split by part"
        if not isinstance(cached, (int, float)):
            price += f" ({paid}: recorded before the prompt tokens at a provider's cache rate were counted)"
        elif cached > 0:
            many = f"{cached:,.0f}" if cached >= 1 else "under 1"
            price += f" ({many} prompt tokens at the provider's cache rate: {paid}, as the cached ones cannot be told apart)"
    return f"    {label}: {total:,.0f}{price}: {shown}"


def tokens_lines(o: SearchOutcome) -> list[str]:
    """Tokens per task on dev by part, for the incumbent and (when it is another variant) the champion."""
    base, champion = o.baseline or ABSENT, o.champion or ABSENT
    rows = [tokens_line("incumbent", present(base.dev, None) or {})]
    if champion.variant_hash != base.variant_hash:
        rows.append(tokens_line(f"trial {champion.trial}", present(champion.dev, None) or {}))
    shown = [r for r in rows if r]
    return ["  Tokens per task on dev, by what each call sends (share, and cost per task where it was recorded):", *shown] \
        if shown else []


def ablation_line(rows: Sequence[Mapping[str, Any]], champion_authors: Sequence[str], metric: str) -> str:
    """The printed account: every layer's gain on dev, and the mutators' share of the harness's
    gain (over the champion's own model with the base harness, so a model swap that loses quality
    does not make the share exceed 100%)."""
    def cost(r: Mapping[str, Any]) -> str:
        change = r.get("cost_change")
        return f" ({change:+.0%} cost/task)" if isinstance(change, (int, float)) else ""

    parts = [f"{r['layer']} {r['gain']:+.3f}{cost(r)}" if r["gain"] is not None else f"{r['layer']} (not measured)" for r in rows]
    harness = [r for r in rows if r["layer"] != "model" and r["gain"] is not None]
    total = sum(max(0.0, r["gain"]) for r in harness)  # a layer that lost quality earns no share
    net = sum(r["gain"] for r in harness)
    mut = next((r["gain"] for r in harness if r["layer"] == "mutator edits"), 0.0)
    who = f" by {', '.join(champion_authors)}" if champion_authors else ""
    changes = [r.get("cost_change") for r in harness]
    known = bool(changes) and all(isinstance(c, (int, float)) for c in changes)  # every harness layer's cost measured
    paid = 1.0
    for change in changes if known else ():
        paid *= 1.0 + float(change or 0.0)
    if harness and net <= 0 and known and paid != 1.0:  # a cost lever: what it earned (or cost) is the bill, not quality
        share = (f"; over its model with the base harness, the harness changes gained no quality net ({net:+.3f}) and "
                 f"{'cut' if paid < 1.0 else 'raised'} the cost per task by {abs(1.0 - paid):.0%}")
    elif harness and net <= 0:  # a share of a gain that is not there would read as one
        share = f"; over its model with the base harness, the harness changes gained nothing net ({net:+.3f})"
    else:
        share = (f"; over its model with the base harness, the mutators' edits{who} earned {max(0.0, mut) / total:.0%} of the gain"
                 if total > 0 else "")
    costed = any(isinstance(r.get("cost_change"), (int, float)) for r in rows)
    what = f"{metric} gain and cost come" if costed else f"{metric} gain comes"
    return f"Where the dev {what} from (one layer at a time from the incumbent): {', '.join(parts) or 'nothing'}{share}"


def answer_lines(summary: SearchOutcome | Mapping[str, Any]) -> list[str]:
    """The answer block: decision, ship command, the champion's edits and the ablation."""
    o = SearchOutcome.of(summary)
    q = quality_objective(o.objectives)
    champion, claim = o.champion or ABSENT, o.claim or ABSENT
    verdict = present(claim.verdict, "none")
    lines = [_answer(o), f"  Why: {str(o.headline or headline(o)).removeprefix('decision ')}"]
    if claim.second_look:
        lines.append(f"  Second look at the holdout (look {present(claim.looks, None)}): read the verdict as weaker than its "
                     "interval says")
    if claim.underpowered:
        lines.append("  Underpowered: the splits cannot show non-inferiority within the margin (run under "
                     "search.allow_underpowered=true); a win here needed the candidate to beat the reference")
    snap = (o.snapshots or ABSENT).champion_path
    if snap and verdict == "win":
        lines.append(f"  Ship it: evoharness promote {snap} && evoharness compile")
    elif snap:
        lines.append(f"  Not shipped: {snap} is not a win, so `evoharness promote --if-win` leaves it "
                     "(--force would ship an unconfirmed change)")
    lines.append(_spend(o))
    lines += tokens_lines(o)
    base = o.baseline or ABSENT
    if champion.variant_hash != base.variant_hash:
        worse = worse_line(present(champion.dev, None) or {}, present(base.dev, None) or {})
        if worse:
            lines.append(worse)
    rows = champion.edits or []
    if rows:
        width = max(len(r["edit"]) for r in rows)
        lines.append("  Edits (author: why):")
        lines += [f"    {r['edit'].ljust(width)}  {r['author']}" + (f": {_short(r['note'], 90)}" if r.get("note") else "")
                  for r in rows]
    if o.ablation:
        lines.append("  " + ablation_line(o.ablation, champion.authors or [], q))
    return lines


def summary_text(summary: SearchOutcome | Mapping[str, Any]) -> str:
    o = SearchOutcome.of(summary)
    objectives = [x["metric"] for x in o.objectives]
    q = quality_objective(o.objectives)
    head = ["", "trial", "round", *[f"train {m}" for m in objectives], f"dev {q}", "changes (authors)"]
    rows = [head]
    base = o.baseline or ABSENT
    rows.append(["", "base", "-", *[_fmt(present(base.train, None), m) for m in objectives], _fmt(present(base.dev, None), q),
                 "baseline"])
    for m in o.front:
        rows.append(["*" if m.champion else "", str(m.trial), str(m.round), *[_fmt(present(m.train, None), k) for k in objectives],
                     _fmt(present(m.dev, None), q), _short(m.changes or ", ".join(m.authors or []) or "-")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [*answer_lines(o), ""]
    n = len(o.front)
    lines.append(f"Pareto front of study {o.study}: {n} member{'' if n == 1 else 's'}, below the baseline's row (* = champion):")
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    base_dev = present(base.dev, {}).get(q)
    better = [m for m in o.front if m.dev and base_dev is not None and m.dev.get(q, 0) > base_dev]
    if better:
        m = min(better, key=lambda m: (m.dev or {}).get("cost_per_task", float("inf")))
        lines.append(
            f"Cheapest member beating the baseline on dev: trial {m.trial} (round {m.round}: {_short(m.changes or '-', 60)}), "
            f"dev {q} {_fmt(m.dev, q)} at {_fmt(m.dev, 'cost_per_task')}/task "
            f"(baseline {_fmt(present(base.dev, None), q)} at {_fmt(present(base.dev, None), 'cost_per_task')})"
        )
    claim = o.claim or ABSENT
    verdict = present(claim.verdict, "none")
    decided = rule_of_record(as_dict(claim), as_dict(o.decision or ABSENT))
    win = "improvement confirmed" if decided.bar is None else f"non-inferior and {decided.comparative}"
    word = {"win": win, "equivalent": f"equal within ±{present(claim.min_effect, 0):g}; no improvement claimed"
            }.get(verdict, "no improvement claimed")
    p = present(claim.p_value, None)
    report = present((o.paths or ABSENT).report, "-")
    if (o.champion or ABSENT).variant_hash == base.variant_hash:
        # the incumbent against itself is no claim: say so instead of a verdict of 0 differences
        lines.append("Holdout: no candidate was claimed; the incumbent stays")
        lines.append(f"Report: {report}")
        return "\n".join(lines)
    lines.append(
        f"Holdout verdict: {verdict} ({word}), over {present(claim.n, 0)} tasks ({present(claim.discordant, '?')} differ)"
        f"{f', p = {p:.3g}' if isinstance(p, (int, float)) else ''}; the interval and the cost are in the answer above"
    )
    lines.append(f"Report: {report}")
    return "\n".join(lines)


def print_summary(summary: Mapping[str, Any]) -> None:
    print(summary_text(summary), flush=True)
