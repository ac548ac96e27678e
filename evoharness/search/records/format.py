"""How a metric value is shown, in the terminal and in the report alike (pure)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

UNPRICED = "unpriced"  # shown for a cost on a route with no price: unknown, not $0
COUNTS = ("tokens_per_task", "skipped", "undelivered", "safety_violations", "episodes", "scored", "n")


def number(value: Any) -> float | None:
    """``value`` as a float to show; None when it is no number, or none a person could read
    (an int too large for a float, infinity, NaN, beyond ±1e300: a forged or corrupted record)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) and abs(v) <= 1e300 else None


def fmt_metric(value: Any, metric: str, *, signed: bool = False, missing: str = "–") -> str:
    """Human formatting by metric family: $ with significant precision, seconds, rates, counts."""
    v = number(value)
    if v is None:
        return missing
    sign = ("+" if v > 0 else "-" if v < 0 else "") if signed else ("-" if v < 0 else "")
    a = abs(v)
    if metric.startswith("cost"):
        digits = 2 if a == 0 else min(8, max(2, 2 - math.floor(math.log10(a))))
        return f"{sign}${a:.{digits}f}"
    if metric.startswith("latency"):
        return f"{sign}{a:.{0 if a >= 100 else 2}f}s"
    if metric in COUNTS:
        return f"{sign}{a:,.0f}"
    return f"{sign}{a:.3f}"


def race_text(race: Mapping[str, Any]) -> str:
    """A proposal's race record (search/optimise/racing.py) in one line, as the round line and the
    report print it: its decision, the tasks it ran (those beyond the search's train tasks named)
    and its paired difference, the quality it is ranked by when the race measured more, and why
    its extension stopped early when it did."""
    def signed(key: str) -> str:
        value = number(race.get(key))
        return "?" if value is None else f"{value:+.3f}"

    more, ranked = number(race.get("extended")), number(race.get("estimate"))
    where = f"{race.get('tasks')} of {race.get('of')} tasks" + (f" ({more:g} beyond the search's train tasks)" if more else "")
    text = f"{race.get('decision')} after {where}, paired difference {signed('mean_diff')} [{signed('low')}, {signed('high')}]"
    stopped = {"round budget": "its extension stopped where the round's episodes ran out",
               "spend cap": "its extension stopped at search.budget_usd"}.get(str(race.get("stopped") or ""))
    return text + (f"; ranked at quality {ranked:.3f}" if ranked is not None else "") + (f"; {stopped}" if stopped else "")
