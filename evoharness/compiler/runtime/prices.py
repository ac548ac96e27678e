"""What a route costs per token: the route's own price (``model.input_cost_per_token`` /
``output_cost_per_token``), else litellm's model map (which a registered provider extends with
its own models), else nothing. A route with no price costs an unknown amount, never $0, unless
its config says it is free (``model.free: true``)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.runtime.llm import ensure_providers


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float
    source: str  # "override" | "litellm" | "free"
    # litellm bills this route's output at another rate above this many prompt tokens (its tiers), or
    # as reasoning tokens (0: always); None when output_per_token is every output token's price
    output_flat_below: int | None = None
    tier_below: int | None = None  # litellm bills input or output at another rate above this many prompt tokens

    def exact(self, prompt_tokens: int, cached_tokens: int | None) -> bool:
        """Whether ``of`` is what litellm bills a call of this many prompt tokens, none of them at a
        cache rate: no tier above it, no reasoning rate of its own."""
        return (cached_tokens == 0 and self.output_flat_below != 0
                and (self.tier_below is None or prompt_tokens < self.tier_below))

    def flat_output(self, prompt_tokens: int) -> bool:
        """Whether a call with this many prompt tokens had all its output billed at ``output_per_token``."""
        return self.output_flat_below is None or prompt_tokens < self.output_flat_below  # litellm's tier starts at its threshold

    def of(self, prompt_tokens: float, completion_tokens: float) -> float:
        return prompt_tokens * self.input_per_token + completion_tokens * self.output_per_token


def litellm_price(route: str) -> Price | None:
    """litellm's price for ``route``, or None when its model map has none. Every provider is
    registered first: a provider's prices (the simulator's tiers, their HTTP routes) are entries
    it adds to that map, and only registering it puts them there."""
    info = _info(route)
    if info is None:
        return None
    cin, cout = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not cin and not cout:  # litellm fills a model it maps without per-token prices with zeros: unknown, not free
        return None
    tiers = [int(m.group(2)) * 1000 for key, value in info.items() if value is not None and (m := _ANY_TIER.fullmatch(str(key)))]
    flat = _output_tier(info, cout)
    if info.get("off_peak_pricing") or info.get("tiered_pricing"):  # priced by the hour, or by a list of tiers: never flat
        tiers, flat = [0], 0
    return Price(float(cin or 0.0), float(cout or 0.0), "litellm", output_flat_below=flat, tier_below=min(tiers) if tiers else None)


def litellm_maps(route: str) -> bool:
    """Whether litellm's model map has an entry for ``route`` (priced or not)."""
    return _info(route) is not None


def _info(route: str) -> Mapping[str, Any] | None:
    lm = ensure_providers()
    try:
        info = lm.get_model_info(route)
    except Exception:  # litellm raises its own "not mapped" error, or a lookup error on an odd name
        return None
    return info if isinstance(info, Mapping) else None


# the standard tiers; _batches, _flex, _priority are other services
_ANY_TIER = re.compile(r"(input|output)_cost_per_token_above_([0-9]+)k_tokens")


def _output_tier(info: Mapping[str, Any], flat: Any) -> int | None:
    """The prompt tokens above which litellm's map bills output at another rate than
    ``output_cost_per_token`` (0 when reasoning tokens have a rate of their own), or None."""
    if info.get("output_cost_per_reasoning_token") not in (None, flat):
        return 0
    tiers = [int(m.group(2)) * 1000 for key, value in info.items()
             if value not in (None, flat) and (m := _ANY_TIER.fullmatch(str(key))) and m.group(1) == "output"]
    return min(tiers) if tiers else None


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

