"""The search report: one self-contained HTML page (inline SVG + CSS) from runs/<study>/summary.json.

Pure core (`render_report`, `scatter_svg`, formatters) under a thin I/O layer (`write_report`,
`report_main`). Only the verdict ``win`` is ever worded as an improvement.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from compiler.atomic import write_text_atomic

COST, LATENCY = "cost_per_task", "latency_p95"
RATES = {"pass_rate", "score_mean", "score_std", "tool_failure_rate", "determinism"}
COMPARE = ("cost_per_task", "latency_p95", "tokens_per_task", "tool_failure_rate")
LABELS = {"pass_rate": "pass rate", "score_mean": "mean score", "cost_per_task": "cost per task ($)",
          "latency_p95": "latency p95 (s)", "tokens_per_task": "tokens per task", "tool_failure_rate": "tool failure rate"}
KINDS = ("trial", "infeasible", "front", "baseline", "champion")
LEGEND = {"trial": "trial", "infeasible": "infeasible trial", "front": "Pareto front", "baseline": "baseline", "champion": "champion"}


# ---------------------------------------------------------------- formatting

def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def fmt_metric(value: Any, metric: str, *, signed: bool = False) -> str:
    """Human formatting by metric family: $ with significant precision, seconds, rates, counts."""
    v = _num(value)
    if v is None:
        return "–"
    sign = ("+" if v > 0 else "-" if v < 0 else "") if signed else ("-" if v < 0 else "")
    a = abs(v)
    if metric.startswith("cost"):
        digits = 2 if a == 0 else min(8, max(2, 2 - math.floor(math.log10(a))))
        return f"{sign}${a:.{digits}f}"
    if metric.startswith("latency"):
        return f"{sign}{a:.{0 if a >= 100 else 2}f}s"
    if metric in ("tokens_per_task", "skipped", "n"):
        return f"{sign}{a:,.0f}"
    return f"{sign}{a:.3f}"


def nice_ticks(lo: float, hi: float, target: int = 5) -> tuple[float, float, list[float]]:
    """A 1-2-5 step covering [lo, hi]; returns the widened (lo, hi) and the ticks. Needs hi > lo."""
    raw = (hi - lo) / max(1, target - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 5.0, 10.0) if m * mag >= raw * (1 - 1e-9))
    start, stop = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    count = int(round((stop - start) / step))
    return start, stop, [round(start + i * step, 12) for i in range(count + 1)]


def _domain(values: Sequence[float], metric: str) -> tuple[float, float, list[float]]:
    if not values:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = min(values), max(values)
        pad = (hi - lo) * 0.06 if hi > lo else (abs(lo) * 0.1 or 1.0)
        lo, hi = (lo - pad if lo - pad >= 0 or lo < 0 else 0.0), hi + pad
    lo, hi, ticks = nice_ticks(lo, hi)
    if metric in RATES and values and min(values) >= 0 and max(values) <= 1:
        ticks = [t for t in ticks if 0 <= t <= 1]
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return lo, hi, ticks


def _tick_label(value: float, step: float, metric: str) -> str:
    digits = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 2
    text = f"{value:.{digits}f}"
    return f"${text}" if metric.startswith("cost") else f"{text}s" if metric.startswith("latency") else text


# ---------------------------------------------------------------- SVG

@dataclass(frozen=True)
class Point:
    x: float | None
    y: float | None
    kind: str  # one of KINDS
    tip: str  # tooltip text (escaped on output)


def _star(cx: float, cy: float, r: float = 9.0) -> str:
    pts = [(cx + (r if i % 2 == 0 else r * 0.45) * math.cos(math.pi * (i / 5 - 0.5)),
            cy + (r if i % 2 == 0 else r * 0.45) * math.sin(math.pi * (i / 5 - 0.5))) for i in range(10)]
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)


def _mark(kind: str, x: float, y: float, tip: str = "") -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if kind == "baseline":
        return f'<rect class="pt baseline" x="{x - 6:.1f}" y="{y - 6:.1f}" width="12" height="12" fill="#111" stroke="#fff">{title}</rect>'
    if kind == "champion":
        return f'<polygon class="pt champion" points="{_star(x, y)}" fill="#d62728" stroke="#fff" stroke-width="0.8">{title}</polygon>'
    style = {"trial": 'r="3.5" fill="#9a9a9a" fill-opacity="0.75"', "infeasible": 'r="3.5" fill="none" stroke="#8a8a8a" stroke-width="1.2"',
             "front": 'r="5.5" fill="#1f77b4" stroke="#fff" stroke-width="1"'}[kind]
    return f'<circle class="pt {kind}" cx="{x:.1f}" cy="{y:.1f}" {style}>{title}</circle>'


def scatter_svg(points: Sequence[Point], x_metric: str, y_metric: str, *, title: str = "",
                x_title: str = "", y_title: str = "", width: int = 540, height: int = 400) -> str:
    """An inline SVG scatter: grey trials, blue front joined by a step line in x order, baseline, champion."""
    left, right, top, bottom = 72, 34, 62, 52
    pw, ph = width - left - right, height - top - bottom
    drawn = [p for p in points if p.x is not None and p.y is not None and math.isfinite(p.x) and math.isfinite(p.y)]
    x0, x1, xt = _domain([p.x for p in drawn if p.x is not None], x_metric)
    y0, y1, yt = _domain([p.y for p in drawn if p.y is not None], y_metric)

    def sx(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="{escape(title)}" font-size="11">',
           f'<text x="{left}" y="18" font-size="14" font-weight="600" fill="#222">{escape(title)}</text>']
    lx = float(left)
    for kind in KINDS:  # legend, spaced by label length
        out.append(_mark(kind, lx + 6, 38) + f'<text x="{lx + 16:.1f}" y="42" fill="#444">{LEGEND[kind]}</text>')
        lx += 30 + 6.2 * len(LEGEND[kind])
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fcfcfc" stroke="#bbb"/>')
    for t in xt:
        out.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" stroke="#eee"/>'
                   f'<text x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle" fill="#555">{_tick_label(t, xt[1] - xt[0] if len(xt) > 1 else 0, x_metric)}</text>')
    for t in yt:
        out.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" fill="#555">{_tick_label(t, yt[1] - yt[0] if len(yt) > 1 else 0, y_metric)}</text>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#333">{escape(x_title or x_metric)}</text>')
    out.append(f'<text transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#333">{escape(y_title or y_metric)}</text>')
    if not drawn:
        out.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#888">no data for these metrics</text>')
    front = sorted((p for p in drawn if p.kind == "front"), key=lambda p: (p.x, p.y))
    if len(front) > 1:
        path = f"M{sx(front[0].x or 0):.1f},{sy(front[0].y or 0):.1f}" + "".join(
            f" H{sx(p.x or 0):.1f} V{sy(p.y or 0):.1f}" for p in front[1:])
        out.append(f'<path class="front-line" d="{path}" fill="none" stroke="#1f77b4" stroke-width="1.6" stroke-opacity="0.7"/>')
    for kind in KINDS:
        out.extend(_mark(p.kind, sx(p.x or 0), sy(p.y or 0), p.tip) for p in drawn if p.kind == kind)
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------- view model

def _plain(metric: str) -> str:
    return LABELS.get(metric, metric).split(" (")[0]


def quality_metric(summary: Mapping[str, Any]) -> str:
    objectives = summary.get("objectives") or []
    return next((str(o["metric"]) for o in objectives if o.get("direction") == "maximize"), "pass_rate")


def _value(item: Mapping[str, Any], metric: str, objectives: Sequence[str], split: str = "train") -> float | None:
    metrics = item.get(split) or {}
    if metric in metrics:
        return _num(metrics[metric])
    values = item.get("values") or []
    return _num(values[objectives.index(metric)]) if metric in objectives and objectives.index(metric) < len(values) else None


def _tip(item: Mapping[str, Any], label: str, metrics: Sequence[str], objectives: Sequence[str]) -> str:
    authors = ", ".join(str(a) for a in item.get("authors") or []) or "–"
    values = " · ".join(f"{m} {fmt_metric(_value(item, m, objectives), m)}" for m in metrics)
    return f"{label}\nauthors: {authors}\n{values}"


def chart_points(summary: Mapping[str, Any], x_metric: str, y_metric: str) -> list[Point]:
    objectives = [str(o["metric"]) for o in summary.get("objectives") or []]
    shown = list(dict.fromkeys([y_metric, *objectives, x_metric]))
    pts: list[Point] = []

    def add(item: Mapping[str, Any], kind: str, label: str) -> None:
        pts.append(Point(_value(item, x_metric, objectives), _value(item, y_metric, objectives), kind, _tip(item, label, shown, objectives)))

    for t in summary.get("trials") or []:
        if t.get("values"):
            feasible = t.get("feasible", True)
            add(t, "trial" if feasible else "infeasible", f"trial {t.get('trial')} (round {t.get('round')})" + ("" if feasible else " – infeasible"))
    for f in summary.get("front") or []:
        add(f, "front", f"Pareto front: trial {f.get('trial')} (round {f.get('round')})")
    if summary.get("baseline"):
        add(summary["baseline"], "baseline", "baseline")
    if summary.get("champion"):
        add(summary["champion"], "champion", f"champion: trial {summary['champion'].get('trial')}")
    return pts


def diff_lines(diff: str) -> list[tuple[str, str]]:
    def cls(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "meta"
        return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
    return [(cls(line), line) for line in (diff or "").splitlines()]


def _banner(claim: Mapping[str, Any] | None, has_champion: bool) -> dict[str, str]:
    if claim is None:
        why = "no holdout claim was made" if has_champion else "the search selected no champion"
        return {"cls": "none", "headline": "Holdout: no claim – no improvement claimed", "detail": f"{why.capitalize()}."}
    ci = _ci_text(claim)
    if claim.get("verdict") == "win":
        return {"cls": "win", "headline": "Holdout: improvement confirmed (win)", "detail": ci}
    verdict = str(claim.get("verdict"))
    why = {"no_win": "the champion did not beat the baseline on the holdout",
           "inconclusive": "the holdout confidence interval does not separate champion and baseline"}.get(verdict, "unknown verdict")
    return {"cls": "nowin", "headline": f"Holdout: {verdict} – no improvement claimed", "detail": f"{why.capitalize()}. {ci}"}


def _ci_text(claim: Mapping[str, Any]) -> str:
    conf = _num(claim.get("confidence"))
    metric = claim.get("metric", "score")
    return (f"Mean {metric} difference (champion − baseline) {fmt_metric(claim.get('mean_diff'), 'diff', signed=True)}, "
            f"{conf * 100 if conf is not None else 95:.0f}% CI [{fmt_metric(claim.get('low'), 'diff')}, {fmt_metric(claim.get('high'), 'diff')}], "
            f"n = {fmt_metric(claim.get('n'), 'n')} tasks.")


def _compare(summary: Mapping[str, Any], quality: str) -> list[dict[str, str]]:
    base, champ = summary.get("baseline") or {}, summary.get("champion") or {}
    rows = []
    for m in (quality, *COMPARE):
        row = {"label": LABELS.get(m, m)}
        for split in ("dev", "holdout"):
            b, c = _num((base.get(split) or {}).get(m)), _num((champ.get(split) or {}).get(m))
            row |= {f"{split}_b": fmt_metric(b, m), f"{split}_c": fmt_metric(c, m),
                    f"{split}_d": fmt_metric(c - b, m, signed=True) if b is not None and c is not None else "–"}
        rows.append(row)
    return rows


def _date(text: Any) -> str:
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return str(text or "")


def _meta(summary: Mapping[str, Any]) -> list[str]:
    trials, objectives = summary.get("trials") or [], summary.get("objectives") or []
    feasible = sum(1 for t in trials if t.get("values") and t.get("feasible", True))
    parts = [_date(summary.get("created_at"))]
    if objectives:
        parts.append("objectives: " + ", ".join(f"{o.get('metric')} {'↑' if o.get('direction') == 'maximize' else '↓'}" for o in objectives))
    rounds = len({t.get("round") for t in trials})
    parts += [f"{len(trials)} trial{'s' * (len(trials) != 1)} ({feasible} feasible) over {rounds} round{'s' * (rounds != 1)}",
              f"{len(summary.get('front') or [])} on the Pareto front"]
    return [p for p in parts if p]


def report_context(summary: Mapping[str, Any]) -> dict[str, Any]:
    quality = quality_metric(summary)
    trials, front, claim = summary.get("trials") or [], summary.get("front") or [], summary.get("claim")
    champion = summary.get("champion")
    axis = {m: LABELS.get(m, m) + " — lower is better" for m in (COST, LATENCY)} | {quality: LABELS.get(quality, quality) + " — higher is better"}
    charts = [Markup(scatter_svg(chart_points(summary, x, quality), x, quality, title=f"{_plain(quality)} vs {_plain(x)} (train)",
                                 x_title=axis[x], y_title=axis[quality])) for x in (COST, LATENCY)]
    cols = (quality, COST, LATENCY)
    rows = [{"trial": f.get("trial", "–"), "round": f.get("round", "–"), "authors": f.get("changes") or ", ".join(map(str, f.get("authors") or [])) or "–",
             "champion": champion is not None and (bool(f.get("champion")) or f.get("trial") == champion.get("trial")),
             "train": [fmt_metric((f.get("train") or {}).get(m), m) for m in cols],
             "dev": [fmt_metric((f.get("dev") or {}).get(m), m) for m in cols],
             "diff": diff_lines(str(f.get("diff") or ""))} for f in front]
    claim_view = None
    if claim:
        conf = _num(claim.get("confidence"))
        claim_view = {"verdict": claim.get("verdict", "–"), "metric": claim.get("metric", "score"),
                      "mean_diff": fmt_metric(claim.get("mean_diff"), "diff", signed=True), "low": fmt_metric(claim.get("low"), "diff"),
                      "high": fmt_metric(claim.get("high"), "diff"), "confidence": f"{conf * 100:.0f}%" if conf is not None else "–",
                      "n": fmt_metric(claim.get("n"), "n"), "cost_delta": fmt_metric(claim.get("cost_delta"), COST, signed=True),
                      "latency_delta": fmt_metric(claim.get("latency_delta"), LATENCY, signed=True),
                      "hashes": list((claim.get("hashes") or {}).items())}
    return {
        "study": str(summary.get("study") or "(unnamed study)"), "meta": _meta(summary), "n_unplotted": sum(1 for t in trials if not t.get("values")),
        "banner": _banner(claim, champion is not None), "charts": charts, "quality": LABELS.get(quality, quality), "rows": rows,
        "compare": _compare(summary, quality) if champion else None, "claim": claim_view, "storage": summary.get("storage"),
        "paths": sorted((summary.get("paths") or {}).items()),
    }


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("search", "templates"), autoescape=True, undefined=jinja2.StrictUndefined)


def render_report(summary: Mapping[str, Any]) -> str:
    """The whole report page as a string: self-contained, opens offline."""
    return _env().get_template("report.html.j2").render(**report_context(summary))


# ---------------------------------------------------------------- I/O

def write_report(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render and write atomically (temp file in the same folder, then os.replace)."""
    # render first: a template error leaves the old report in place
    return write_text_atomic(path, render_report(summary))


def report_main(argv: Sequence[str] | None = None) -> int:
    """`evoharness report <study> [--runs DIR]`: summary.json in, report.html out; prints its path."""
    parser = argparse.ArgumentParser(prog="evoharness report", description="render the HTML report of a search study")
    parser.add_argument("study")
    parser.add_argument("--runs", default="runs", help="output root holding <study>/summary.json (default: runs)")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help or a usage error: argparse already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    source = Path(args.runs) / args.study / "summary.json"
    if not source.is_file():
        print(f"error: no search summary at {source}; run `evoharness search` with search.study={args.study} first", file=sys.stderr)
        return 2
    try:
        summary = json.loads(source.read_text(encoding="utf-8"))
        if not isinstance(summary, dict):
            raise ValueError(f"expected a JSON object, got {type(summary).__name__}")
    except (OSError, ValueError) as exc:
        print(f"error: cannot read search summary at {source} ({exc}); rerun `evoharness search` with search.study={args.study}", file=sys.stderr)
        return 2
    print(write_report(summary, source.parent / "report.html"))
    return 0
