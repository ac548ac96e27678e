"""A search's spend, checked before anything is paid for: every route whose calls the search counts
has a price (or is declared free), and a cap leaves room for the baseline (search/optimise/forecast.py)."""
from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.prices import route_price
from evoharness.compiler.runtime.workload import Workload
from evoharness.search.mutators.base import MUTATORS
from evoharness.search.optimise.forecast import forecast
from evoharness.search.optimise.freeze import Splits
from evoharness.search.optimise.settings import RunSettings

FIX = ("set {where}input_cost_per_token and output_cost_per_token (USD per token), or {where}free=true if its calls "
       "cost nothing (a self-hosted model)")


def routes(settings: RunSettings) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(config path, where its price is set, price settings) of every route the search pays for: the
    incumbent, its escalation route, each search.models entry, the teacher, and the LLM mutators
    (their route parameter)."""
    yield "model", "model.", settings.models["base"]
    for name, m in settings.models.items():
        if name != "base":
            yield f"search.models.{name}", f"model/{name}.yaml's ", m
    escalation = (settings.agent.get("escalation") or {}).get("model")
    if isinstance(escalation, Mapping):  # the stronger route a troubled turn is handed to: paid like the rest
        yield "agent.escalation.model", "agent.escalation.model.", escalation
    if settings.teacher is not None:
        yield f"search.teacher={settings.search.teacher}", f"model/{settings.search.teacher}.yaml's ", settings.teacher
    for i, mutator in enumerate(settings.mutators):
        route = mutator.params.get("route", _default_route(mutator.name))
        if isinstance(route, str):  # a mutator without a route makes no model call
            yield f"mutators.enabled[{i}].params.route", f"mutators.enabled[{i}].params.", {**mutator.params, "route": route}


def _default_route(name: str) -> Any:
    """A mutator's route when its params leave it out: its factory's default (None: it has none)."""
    try:
        default = inspect.signature(MUTATORS.get(name)).parameters["route"].default
    except (KeyError, TypeError, ValueError):
        return None
    return None if default is inspect.Parameter.empty else default


def check_spend(settings: RunSettings, workload: Workload) -> None:
    """Both checks, in the order a user fixes them: prices first, then the cap they make known."""
    refuse_unpriced(settings)
    refuse_short_budget(settings, workload)


def refuse_unpriced(settings: RunSettings) -> None:
    """A route with no price would cost $0 wherever a search reads cost: its objectives, the decision's
    "cheaper", a cost ceiling, the claim's saving, the cap and the spend it reports. Refused, naming it,
    whichever of those the config uses."""
    why = "a search compares and reports what each variant costs"
    for path, where, m in routes(settings):
        free = m.get("free", False)
        if not isinstance(free, bool):
            raise ConfigError(f"{path.rpartition('.route')[0] or path}.free", f"{free!r} is not true or false", "set free: true or false")
        if route_price(str(m["route"]), input_cost_per_token=m.get("input_cost_per_token"),
                       output_cost_per_token=m.get("output_cost_per_token"), free=free) is None:
            raise ConfigError(path, f"route {m['route']!r} has no price (litellm's model map has none, or lists it at $0, which "
                              "is how it answers for a model it maps without prices; and no price is set), "
                              f"and {why}: it would be counted at $0", FIX.format(where=where))


def refuse_short_budget(settings: RunSettings, workload: Workload) -> None:
    """A cap below the baseline's forecast would stop the search during its first evaluation, with nothing
    decided. The forecast leaves the tools' answers out of the prompt, so it is usually below the true
    cost (about half of it on the simulator): only a cap below it is certain to be short."""
    cap = settings.search.budget_usd
    if cap is None:
        return
    f = forecast(settings, Splits.of(settings, workload))
    if f is not None and cap < f.baseline:
        raise ConfigError("search.budget_usd", f"{cap:g} is below the baseline's projected train evaluation, about "
                          f"${f.baseline:.4f} (from prices and the rendered prompt's tokens, tool results left out, so likely "
                          f"more), and dev and the holdout need about ${f.finish:.4f} after it",
                          f"set search.budget_usd={_ceil(f.minimum)} or more, lower search.train_limit or search.samples, "
                          "or search.budget_usd=null for no cap")


def _ceil(usd: float) -> str:
    """``usd`` rounded up to two significant figures: a budget to type that covers it."""
    import math

    if usd <= 0:
        return "0.01"
    step = 10 ** (math.floor(math.log10(usd)) - 1)
    return f"{math.ceil(usd / step) * step:.{max(0, -int(math.floor(math.log10(step))))}f}"
