"""What a model call costs: the route's own price, else litellm's for the reply (which prices a
provider's cached prompt tokens at its cache rate); the share of it the prompt made; and a cached
reply at today's price. A route nobody has a price for costs an unknown amount, never $0."""
from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.llm import ensure_providers, first_line
from evoharness.compiler.runtime.prices import Price, route_price
from evoharness.compiler.runtime.reply import ModelReply

log = logging.getLogger(__name__)


class Billing:
    """One route's prices: ``cost`` of a reply, ``input_cost`` of its prompt, ``reprice`` of a cached one."""

    def __init__(self, model_route: str, route: RouteSettings) -> None:
        self.model_route = model_route
        self.route = route
        self._warned = False
        self._price: Price | None | bool = False  # the route's price table, looked up on the first priced call

    def _own(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The route's own price for these tokens, or None when the route has none."""
        r = self.route
        if r.input_cost_per_token is None and r.output_cost_per_token is None:
            return None
        return prompt_tokens * (r.input_cost_per_token or 0.0) + completion_tokens * (r.output_cost_per_token or 0.0)

    def cost(self, response: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The call's price in USD, or None when nobody knows it: a route litellm has no price for
        is not free, and a $0 there would put it on a cost front for nothing (``model.free`` says
        it is free)."""
        own = self._own(prompt_tokens, completion_tokens)
        if own is not None:
            return own
        priced = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if isinstance(priced, int | float) and not isinstance(priced, bool):
            return float(priced)  # litellm priced the reply already: no second lookup
        try:
            return float(ensure_providers().completion_cost(completion_response=response))
        except Exception as exc:  # litellm has no price for this model
            if self.route.free:
                return 0.0
            if not self._warned:
                log.warning("no price for %s (%s): its cost is reported as unpriced; set model.input_cost_per_token/"
                            "output_cost_per_token, or model.free=true if it costs nothing", self.model_route, first_line(exc))
                self._warned = True
            return None

    def settings(self) -> dict[str, Any]:
        """The route's own price (``input_cost_per_token``, ``output_cost_per_token``, ``free``), or {}
        when litellm's map prices it: what a stored result's costs were worked out with."""
        r = self.route
        if r.input_cost_per_token is None and r.output_cost_per_token is None and not r.free:
            return {}
        return {"input_cost_per_token": r.input_cost_per_token, "output_cost_per_token": r.output_cost_per_token, "free": r.free}

    def reprice(self, reply: ModelReply) -> ModelReply:
        """A cached reply at today's price: a route's own price is not in the cache key (the answer does
        not depend on it), so a corrected price applies to replies cached before it; a route now
        declared free costs $0 where it was unpriced. A price read from litellm stays as it was billed."""
        cost = self._own(reply.prompt_tokens, reply.completion_tokens)
        if cost is None:
            cost = 0.0 if reply.cost_usd is None and self.route.free else reply.cost_usd
        if cost == reply.cost_usd and (reply.input_cost_usd is not None or not cost):
            return reply
        # a reply cached before its prompt's cost was kept, or repriced: the prompt's share worked out again
        return dataclasses.replace(reply, cost_usd=cost, input_cost_usd=self.input_cost(reply.completion_tokens, cost))

    def input_cost(self, completion_tokens: int, total: float | None) -> float | None:
        """The share of a call's cost its prompt made: the total less the completion at the route's
        output price, within [0, total]. A provider's prompt discounts (cached tokens) and surcharges
        are all on the input side, so they stay there. None when the total or the route's price is
        unknown, or when the output is not billed at one price per token (litellm prices some routes'
        output by tier or reasoning tokens, and a flat rate would move that surcharge onto the
        prompt); 0 for a call that cost nothing."""
        if total is None or not math.isfinite(total) or total < 0:
            return None
        if total == 0:
            return 0.0
        if self._price is False:
            r = self.route
            self._price = route_price(self.model_route, input_cost_per_token=r.input_cost_per_token,
                                      output_cost_per_token=r.output_cost_per_token, free=r.free)
        price = self._price
        if not isinstance(price, Price) or not price.flat_output:
            return None
        return min(total, max(0.0, total - completion_tokens * price.output_per_token))

