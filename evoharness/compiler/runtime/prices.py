"""What a route costs per token: the route's own price (``model.input_cost_per_token`` /
``output_cost_per_token``), else litellm's model map (which a registered provider extends with
its own models), else nothing. A route with no price costs an unknown amount, never $0, unless
its config says it is free (``model.free: true``)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.runtime.llm import ensure_providers


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float
    source: str  # "override" | "litellm" | "free"
    flat_output: bool = True  # False: litellm bills the output by tier or reasoning tokens, not output_per_token alone

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        return prompt_tokens * self.input_per_token + completion_tokens * self.output_per_token


def litellm_price(route: str) -> Price | None:
    """litellm's price for ``route``, or None when its model map has none. Every provider is
    registered first: a provider's prices (the simulator's tiers, their HTTP routes) are entries
    it adds to that map, and only registering it puts them there."""
    lm = ensure_providers()
    try:
        info = lm.get_model_info(route)
    except Exception:  # litellm raises its own "not mapped" error, or a lookup error on an odd name
        return None
    cin, cout = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not cin and not cout:  # litellm fills a model it maps without prices with zeros: unknown, not free
        return None
    return Price(float(cin or 0.0), float(cout or 0.0), "litellm", flat_output=not _uneven_output(info, cout))


def _uneven_output(info: Mapping[str, Any], flat: Any) -> bool:
    """Whether litellm's map bills some output tokens at another rate than ``output_cost_per_token``:
    above a prompt-length tier, or as reasoning tokens."""
    return any(value is not None and value != flat for key, value in info.items()
               if str(key).startswith("output_cost_per_token_above_") or key == "output_cost_per_reasoning_token")


def route_price(route: str, *, input_cost_per_token: float | None = None, output_cost_per_token: float | None = None,
                free: bool = False) -> Price | None:
    """The price a call on ``route`` is charged at: the override, litellm's, $0 for a route
    declared free, or None (unknown)."""
    if input_cost_per_token is not None or output_cost_per_token is not None:
        return Price(float(input_cost_per_token or 0.0), float(output_cost_per_token or 0.0), "override")
    found = litellm_price(route)
    if found is not None:
        return found
    return Price(0.0, 0.0, "free") if free else None


def config_price(model: Mapping[str, Any]) -> Price | None:
    """``route_price`` of a model config (``model`` or a ``search.models`` file, as a mapping)."""
    return route_price(str(model.get("route") or ""), input_cost_per_token=model.get("input_cost_per_token"),
                       output_cost_per_token=model.get("output_cost_per_token"), free=bool(model.get("free", False)))

