"""The search report: one self-contained HTML page (inline SVG + CSS) from runs/<study>/summary.json.

Pure core (`render_report`, `scatter_svg`, formatters) under a thin I/O layer (`write_report`;
the command is search/cli/report.py). Only the verdict ``win`` is ever worded as an improvement.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.runtime.workload import SPLITS
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.evaluation.decision import rule_of_record
from evoharness.search.records.format import fmt_metric, race_text
from evoharness.search.records.format import number as _num
from evoharness.search.records.headline import headline
from evoharness.search.records.outcome import ABSENT, Claim, Member, SearchOutcome, as_dict, present
from evoharness.search.records.report_svg import COMPARE, COST, LABELS, LATENCY, Point, scatter_svg
from evoharness.search.records.summary import answer_lines
from evoharness.search.records.transcript_pages import PAGE

# ---------------------------------------------------------------- view model

def _plain(metric: str) -> str:
    return LABELS.get(metric, metric).split(" (")[0]


def _value(item: Mapping[str, Any], metric: str, objectives: Sequence[str], split: str = "train") -> float | None:
    metrics = item.get(split) or {}
    if metric in metrics:
        return _num(metrics[metric])
    values = item.get("values") or []
    return _num(values[objectives.index(metric)]) if metric in objectives and objectives.index(metric) < len(values) else None


def _tip(item: Mapping[str, Any], label: str, metrics: Sequence[str], objectives: Sequence[str]) -> str:
    authors = ", ".join(str(a) for a in item.get("authors") or []) or "–"
    values = " · ".join(f"{m} {fmt_metric(_value(item, m, objectives), m)}" for m in metrics)
    race = item.get("race")
    raced = f"\nagainst its anchor: {race_text(race)}" if isinstance(race, Mapping) else ""
    return f"{label}\nauthors: {authors}\n{values}{raced}"


def _row(item: Member | Mapping[str, Any]) -> Mapping[str, Any]:
    """A member's fields as the chart reads a trial row's."""
    return item.to_dict() if isinstance(item, Member) else item


def chart_points(summary: SearchOutcome | Mapping[str, Any], x_metric: str, y_metric: str) -> list[Point]:
    o = SearchOutcome.of(summary)
    objectives = [str(x["metric"]) for x in o.objectives or []]
    shown = list(dict.fromkeys([y_metric, *objectives, x_metric]))
    pts: list[Point] = []

    def add(item: Member | Mapping[str, Any], kind: str, label: str) -> None:
        row = _row(item)
        pts.append(Point(_value(row, x_metric, objectives), _value(row, y_metric, objectives), kind, _tip(row, label, shown, objectives)))

    for t in o.trials or []:
        if t.get("values"):
            feasible = t.get("feasible", True)
            add(t, "trial" if feasible else "infeasible",
                f"trial {t.get('trial')} (round {t.get('round')})" + ("" if feasible else " – infeasible"))
    for f in o.front or []:
        add(f, "front", f"Pareto front: trial {present(f.trial, None)} (round {present(f.round, None)})")
    if o.baseline:
        add(o.baseline, "baseline", "baseline")
    if o.champion:
        add(o.champion, "champion", f"champion: trial {present(o.champion.trial, None)}")
    return pts


def dev_points(summary: SearchOutcome | Mapping[str, Any], x_metric: str, y_metric: str) -> list[Point]:
    """The dev panel: the members the decision was made on (the incumbent, the front members run on
    dev, the champion), by their dev figures only."""
    o = SearchOutcome.of(summary)
    pts: list[Point] = []

    def add(item: Member, kind: str, label: str) -> None:
        dev = present(item.dev, None) or {}
        x, y = _num(dev.get(x_metric)), _num(dev.get(y_metric))
        if x is not None and y is not None:
            tip = f"{label}\n" + " · ".join(f"dev {m} {fmt_metric(_num(dev.get(m)), m)}" for m in dict.fromkeys([y_metric, x_metric]))
            pts.append(Point(x, y, kind, tip))

    for f in o.front or []:
        add(f, "front", f"trial {present(f.trial, None)} (round {present(f.round, None)}): {present(f.changes, '')}")
    if o.baseline:
        add(o.baseline, "baseline", "incumbent")
    if o.champion and o.champion.variant_hash != present(o.baseline.variant_hash if o.baseline else None, None):
        add(o.champion, "champion", f"champion: trial {present(o.champion.trial, None)}")
    return pts


def diff_lines(diff: str) -> list[tuple[str, str]]:
    def cls(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "meta"
        return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
    return [(cls(line), line) for line in (diff or "").splitlines()]


def _banner(made: Claim | None, has_champion: bool) -> dict[str, str]:
    if not made:
        why = "no holdout claim was made" if has_champion else "the search selected no champion"
        return {"cls": "none", "headline": "Holdout: no claim – no improvement claimed", "detail": f"{why.capitalize()}."}
    if present(made.n, None) == 0 and not made.tasks:  # the incumbent stayed (claim.no_candidate_claim)
        return {"cls": "none", "headline": "Holdout: sealed – the incumbent stays",
                "detail": "No candidate was claimed, so nothing was run on the holdout: no episode paid there, no look spent."}
    claim = made.to_dict()
    ci = _ci_text(made)
    if made.second_look:
        ci = f"Second look at the holdout (look {present(made.looks, None)}): the claim is weaker than its interval says. {ci}"
    if made.underpowered:
        ci = f"Underpowered: the splits cannot show non-inferiority within the margin (search.allow_underpowered). {ci}"
    verdict = str(present(made.verdict, None))
    decided = rule_of_record(claim, {})
    if decided.bar is not None:
        # the question was "cheaper (faster) and as good": the wording must not be about beating anything
        if verdict == "win":
            return {"cls": "win", "headline": f"Holdout: {decided.win_words()} (win)", "detail": ci}
        return {"cls": "nowin", "headline": f"Holdout: {verdict} – nothing shipped", "detail": f"{decided.shortfall(claim)} {ci}"}
    if verdict == "win":
        return {"cls": "win", "headline": "Holdout: improvement confirmed (win)", "detail": ci}
    why = {"no_win": "the champion did not beat the baseline on the holdout",
           "equivalent": "champion and baseline are equal on the holdout within the smallest effect that counts",
           "inconclusive": "the holdout confidence interval does not separate champion and baseline"}.get(verdict, "unknown verdict")
    return {"cls": "nowin", "headline": f"Holdout: {verdict} – no improvement claimed", "detail": f"{why.capitalize()}. {ci}"}


def _ci_text(claim: Claim) -> str:
    conf = _num(present(claim.confidence, None))
    metric = present(claim.metric, "score")
    versus = "reference" if present(claim.reference, "incumbent") != "incumbent" else "baseline"
    return (f"Mean {metric} difference (champion − {versus}) {fmt_metric(present(claim.mean_diff, None), 'diff', signed=True)}, "
            f"{conf * 100 if conf is not None else 95:.0f}% CI [{fmt_metric(present(claim.low, None), 'diff')}, "
            f"{fmt_metric(present(claim.high, None), 'diff')}], "
            f"n = {fmt_metric(present(claim.n, None), 'n')} tasks.")


def _compare(o: SearchOutcome, quality: str) -> list[dict[str, str]]:
    base, champ = o.baseline or ABSENT, o.champion or ABSENT
    rows = []
    for m in (quality, *COMPARE):
        row = {"label": LABELS.get(m, m)}
        for split in ("dev", "holdout"):
            b, c = _num(present(getattr(base, split), {}).get(m)), _num(present(getattr(champ, split), {}).get(m))
            row |= {f"{split}_b": fmt_metric(b, m), f"{split}_c": fmt_metric(c, m),
                    f"{split}_d": fmt_metric(c - b, m, signed=True) if b is not None and c is not None else "–"}
        rows.append(row)
    return rows


def _date(text: Any) -> str:
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return str(text or "")


def _meta(o: SearchOutcome) -> list[str]:
    trials, objectives = o.trials or [], o.objectives or []
    feasible = sum(1 for t in trials if t.get("values") and t.get("feasible", True))
    parts = [_date(present(o.created_at, None))]
    if objectives:
        parts.append("objectives: " + ", ".join(f"{x.get('metric')} {'↑' if x.get('direction') == 'maximize' else '↓'}"
                                                for x in objectives))
    rounds = len({t.get("round") for t in trials})
    raced = [t["race"] for t in trials if isinstance(t.get("race"), Mapping)]
    parts += [f"{len(trials)} trial{'s' * (len(trials) != 1)} ({feasible} feasible) over {rounds} round{'s' * (rounds != 1)}",
              f"{len(o.front or [])} on the Pareto front"]
    if raced:
        decided = {d: sum(1 for r in raced if r.get("decision") == d) for d in ("accepted", "undecided", "rejected")}
        parts.append(f"{len(raced)} proposals paired with their anchors: {decided['accepted']} accepted, "
                     f"{decided['undecided']} undecided, {decided['rejected']} raced out early")
    return [p for p in parts if p]


def report_context(summary: SearchOutcome | Mapping[str, Any]) -> dict[str, Any]:
    o = SearchOutcome.of(summary)
    quality = quality_objective(o.objectives or [])
    trials, front, made = o.trials or [], o.front or [], o.claim or None
    champion = o.champion or None
    axis = ({m: LABELS.get(m, m) + " — lower is better" for m in (COST, LATENCY)}
            | {quality: LABELS.get(quality, quality) + " — higher is better"})
    charts = [Markup(scatter_svg(chart_points(o, x, quality), x, quality, title=f"{_plain(quality)} vs {_plain(x)} (train)",
                                 x_title=axis[x], y_title=axis[quality])) for x in (COST, LATENCY)]
    dev = dev_points(o, COST, quality)
    if len(dev) > 1:  # the decision's own evidence: beside the train charts, not instead of them
        # no front line: the members run on dev are picked from the train front, not a front of their own on dev
        legend = {"front": "front member run on dev", "baseline": "incumbent"} | (
            {"champion": "champion"} if any(p.kind == "champion" for p in dev) else {})
        charts.append(Markup(scatter_svg(dev, COST, quality, title=f"{_plain(quality)} vs {_plain(COST)} (dev: what the decision read)",
                                         x_title=axis[COST], y_title=axis[quality], legend=legend, front_line=False)))
    cols = (quality, COST, LATENCY)
    rows = [{"trial": present(f.trial, "–"), "round": present(f.round, "–"), "dashboard": present(f.dashboard_trial, None),
             "transcripts": _transcripts(present(f.transcripts, None)),
             # each edit with its author's reason for it: what the mutator read in the failures
             "reasons": [(str(e.get("edit", "")), str(e.get("author", "")), str(e.get("note", "")))
                         for e in present(f.edits, None) or () if isinstance(e, Mapping) and e.get("note")],
             "authors": f.changes or ", ".join(map(str, f.authors or [])) or "–",
             # by variant: trial numbers restart every round, so a number can name two members
             "champion": champion is not None and f.variant_hash == champion.variant_hash,
             "train": [fmt_metric(present(f.train, {}).get(m), m) for m in cols],
             "dev": [fmt_metric(present(f.dev, {}).get(m), m) for m in cols],
             "diff": diff_lines(str(f.diff or "")),
             "losses": ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in (f.losses or {}).items())} for f in front]
    claim_view = None
    if made:
        conf = _num(present(made.confidence, None))
        p_value = present(made.p_value, None)
        claim_view = {"verdict": present(made.verdict, "–"), "metric": present(made.metric, "score"),
                      "mean_diff": fmt_metric(present(made.mean_diff, None), "diff", signed=True),
                      "low": fmt_metric(present(made.low, None), "diff"), "high": fmt_metric(present(made.high, None), "diff"),
                      "confidence": f"{conf * 100:.0f}%" if conf is not None else "–", "n": fmt_metric(present(made.n, None), "n"),
                      "cost_delta": fmt_metric(present(made.cost_delta, None), COST, signed=True),
                      "latency_delta": fmt_metric(present(made.latency_delta, None), LATENCY, signed=True),
                      "hashes": list((made.hashes or {}).items()),
                      "p_value": f"{p_value:.3g}" if isinstance(p_value, (int, float)) else None}
    return {
        "study": str(o.study or "(unnamed study)"), "meta": _meta(o),
        "n_unplotted": sum(1 for t in trials if not t.get("values")),
        "banner": _banner(made, champion is not None), "decision_line": headline(o) if made else None,
        "charts": charts, "quality": LABELS.get(quality, quality), "rows": rows,
        "compare": _compare(o, quality) if champion else None, "claim": claim_view, "storage": _storage(o),
        "paths": _relative_paths(as_dict(o.paths)), "answer": _answer_block(o) if made else [],
        "splits": _splits(as_dict(o.splits)), "doctor": doctor_text(present(o.doctor, None)),
    }


def doctor_text(state: Mapping[str, Any] | None) -> str:
    """`evoharness doctor`'s verdict on the workload and harness the search ran, in a sentence."""
    if not state:
        return "not recorded (a study searched by an evoharness that did not record it)"
    checked, total = state.get("tasks_checked"), state.get("tasks_total")
    if state.get("passed") is True and checked == total:
        shipped = " (the record the workload's package ships for this exact workload and harness)" if state.get("shipped") else ""
        return f"passed every gate on all {total} tasks{shipped}"
    if state.get("passed") is True:
        return f"passed on {checked} of its {total} tasks only (workload.limit): the others are unchecked"
    if state.get("passed") is False:
        return "FAILED its last run: scores may be wrong; run `evoharness doctor` to see which gate"
    return "never run on this workload and harness: run `evoharness doctor` to check its gold, scorer and determinism"


LISTED_FAILURES = 40  # failed tasks linked per member; the page itself filters all of them


def _transcripts(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A member's failed tasks as links into its transcript page (the report sits in the study's folder)."""
    if not found or not isinstance(found.get("page"), str) or not PAGE.fullmatch(found["page"]):
        return None
    failed = [str(t) for t in found.get("failed") or ()]
    return {"page": str(found["page"]), "split": str(found.get("split", "")), "n": len(failed),
            "tasks": [(t, t.rsplit("/", 1)[-1]) for t in failed[:LISTED_FAILURES]], "more": max(0, len(failed) - LISTED_FAILURES)}


def _answer_block(o: SearchOutcome) -> list[str]:
    """The answer as the search printed it, but for its "Why" line: the banner above it says that."""
    return [line for line in answer_lines(o) if not line.startswith("  Why: ")]


def _relative_paths(paths: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The study's files as seen from the report's own folder: the page travels, the machine's paths do not."""
    report = paths.get("report")
    if not report:
        return sorted((k, os.path.basename(str(v))) for k, v in paths.items() if k != "report")
    here = os.path.dirname(str(report))
    return sorted((k, os.path.relpath(str(v), here)) for k, v in paths.items() if k != "report")


def _storage(o: SearchOutcome) -> str | None:
    """The dashboard's storage URL: a SQLite file beside the report by its name (run the command in
    the report's folder), any other URL with its password already masked."""
    url = present(o.storage, None)
    if isinstance(url, str) and url.startswith("sqlite:///"):
        return f"sqlite:///{os.path.basename(url.removeprefix('sqlite:///'))}  (in this page's folder)"
    return url


def _splits(splits: Mapping[str, Any]) -> dict[str, Any] | None:
    """Rows of stratum x split task counts, so a reader sees every stratum is in every split."""
    strata: Mapping[str, Mapping[str, int]] = splits.get("strata") or {}
    if not strata:
        return None
    names = sorted({s for counts in strata.values() for s in counts})
    order = [k for k in SPLITS if k in strata] + sorted(k for k in strata if k not in SPLITS)
    return {"hash": str(splits.get("hash") or "–"), "columns": order,
            "rows": [[name, *[int(strata[k].get(name, 0)) for k in order]] for name in names],
            "totals": [sum(strata[k].values()) for k in order]}


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    # the summary it renders is data read from disk: sandboxed, like every template
    return ImmutableSandboxedEnvironment(loader=jinja2.PackageLoader("evoharness.search.records", "templates"), autoescape=True,
                                         undefined=jinja2.StrictUndefined)


def render_report(summary: Mapping[str, Any]) -> str:
    """The whole report page as a string: self-contained, opens offline."""
    return _env().get_template("report.html.j2").render(**report_context(summary))


# ---------------------------------------------------------------- I/O

def write_report(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render and write atomically (temp file in the same folder, then os.replace)."""
    # render first: a template error leaves the old report in place
    return write_text_atomic(path, render_report(summary))
