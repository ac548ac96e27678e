"""Formatting and the inline SVG scatter charts of the search report (pure: data in, markup out)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

COST, LATENCY = "cost_per_task", "latency_p95"

RATES = {"pass_rate", "score_mean", "score_std", "tool_failure_rate", "determinism"}
COMPARE = ("cost_per_task", "latency_p95", "tokens_per_task", "tool_failure_rate")
LABELS = {"pass_rate": "pass rate", "score_mean": "mean score", "cost_per_task": "cost per task ($)",
          "latency_p95": "latency p95 (s)", "tokens_per_task": "tokens per task", "tool_failure_rate": "tool failure rate"}
KINDS = ("trial", "infeasible", "front", "baseline", "champion")
LEGEND = {"trial": "trial", "infeasible": "infeasible trial", "front": "Pareto front", "baseline": "baseline", "champion": "champion"}


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


def log_domain(values: Sequence[float]) -> tuple[float, float, list[float]] | None:
    """Decades covering ``values`` and ticks at 1-2-5 of each, when they are all positive and span at
    least a decade (cost across models does: the cheap ones would sit on top of each other), else None."""
    if not values or min(values) <= 0 or max(values) / min(values) < 10:
        return None
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    steps = (1.0, 2.0, 5.0) if hi - lo <= 3 else (1.0,)
    ticks = [m * 10.0 ** e for e in range(lo, hi + 1) for m in steps if m * 10.0 ** e <= 10.0 ** hi]
    return 10.0 ** lo, 10.0 ** hi, ticks


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
                x_title: str = "", y_title: str = "", width: int = 540, height: int = 400,
                legend: Mapping[str, str] = LEGEND, front_line: bool = True) -> str:
    """An inline SVG scatter: grey trials, blue front joined by a step line in x order (unless
    ``front_line`` is off), baseline, champion; ``legend`` names the kinds it lists."""
    left, right, top, bottom = 72, 34, 62, 52
    pw, ph = width - left - right, height - top - bottom
    drawn = [p for p in points if p.x is not None and p.y is not None and math.isfinite(p.x) and math.isfinite(p.y)]
    xs = [p.x for p in drawn if p.x is not None]
    log_x = log_domain(xs) if x_metric.startswith("cost") else None
    x0, x1, xt = log_x or _domain(xs, x_metric)
    y0, y1, yt = _domain([p.y for p in drawn if p.y is not None], y_metric)
    if log_x:
        x_title = f"{x_title or x_metric} (log scale)"

    def sx(v: float) -> float:
        if log_x:
            return left + (math.log10(v) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) * pw
        return left + (v - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
           f'aria-label="{escape(title)}" font-size="11">',
           f'<text x="{left}" y="18" font-size="14" font-weight="600" fill="#222">{escape(title)}</text>']
    lx = float(left)
    for kind in (k for k in KINDS if k in legend):  # legend, spaced by label length
        out.append(_mark(kind, lx + 6, 38) + f'<text x="{lx + 16:.1f}" y="42" fill="#444">{escape(legend[kind])}</text>')
        lx += 30 + 6.2 * len(legend[kind])
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fcfcfc" stroke="#bbb"/>')
    for t in xt:
        out.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" stroke="#eee"/>'
                   f'<text x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle" fill="#555">'
                   f'{_tick_label(t, t if log_x else xt[1] - xt[0] if len(xt) > 1 else 0, x_metric)}</text>')
    for t in yt:
        out.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" fill="#555">'
                   f'{_tick_label(t, yt[1] - yt[0] if len(yt) > 1 else 0, y_metric)}</text>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#333">{escape(x_title or x_metric)}</text>')
    out.append(f'<text transform="translate(16 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" fill="#333">'
               f'{escape(y_title or y_metric)}</text>')
    if not drawn:
        out.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" text-anchor="middle" fill="#888">'
                   'no data for these metrics</text>')
    front = sorted((p for p in drawn if p.kind == "front"), key=lambda p: (p.x, p.y))
    if front_line and len(front) > 1:
        path = f"M{sx(front[0].x or 0):.1f},{sy(front[0].y or 0):.1f}" + "".join(
            f" H{sx(p.x or 0):.1f} V{sy(p.y or 0):.1f}" for p in front[1:])
        out.append(f'<path class="front-line" d="{path}" fill="none" stroke="#1f77b4" stroke-width="1.6" stroke-opacity="0.7"/>')
    for kind in KINDS:
        out.extend(_mark(p.kind, sx(p.x or 0), sy(p.y or 0), p.tip) for p in drawn if p.kind == kind)
    out.append("</svg>")
    return "\n".join(out)
