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
from evoharness.compiler.runtime.prices import Price, litellm_maps, litellm_price, route_price
from evoharness.compiler.runtime.reply import ModelReply

log = logging.getLogger(__name__)


class Billing:
    """One route's prices: ``cost`` of a reply, ``input_cost`` of its prompt, ``reprice`` of a cached one."""

    def __init__(self, model_route: str, route: RouteSettings) -> None:
        self.model_route = model_route
        self.route = route
        self._warned = False
        self._warned_bill = False
        self._price: Price | None | bool = False  # the route's price table, looked up on the first priced call
        self._listed_at_zero: bool | None = None  # litellm maps the model without a per-token price; looked up on a $0

    def _own(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The route's own price for these tokens, or None when the route has none."""
        r = self.route
        if r.input_cost_per_token is None and r.output_cost_per_token is None:
            return None
        return prompt_tokens * (r.input_cost_per_token or 0.0) + completion_tokens * (r.output_cost_per_token or 0.0)

    def _table(self) -> Price | None:
        """The route's price table (its own, litellm's, or $0 when declared free), looked up once."""
        if self._price is False:
            r = self.route
            self._price = route_price(self.model_route, input_cost_per_token=r.input_cost_per_token,
                                      output_cost_per_token=r.output_cost_per_token, free=r.free)
        return self._price if isinstance(self._price, Price) else None

    def cost(self, response: Any, prompt_tokens: int, completion_tokens: int,
             cached_tokens: int | None = 0) -> tuple[float | None, str | None]:
        """The call's price in USD and what it came from (reply.PRICED_BY), or (None, None) when nobody
        knows it: a route litellm has no price for is not free, and a $0 there would put it on a cost
        front for nothing (``model.free`` says it is free). litellm's bill for the reply is taken when
        a bill can be it, except a $0 for a model litellm lists at $0 (how it answers for one it maps
        without prices); one below $0 or not finite is the route's table where that is exactly what
        litellm bills, else unknown."""
        own = self._own(prompt_tokens, completion_tokens)
        if own is not None:
            return own, "route"
        priced = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        try:
            if not isinstance(priced, int | float) or isinstance(priced, bool):  # litellm has not priced the reply yet
                priced = ensure_providers().completion_cost(completion_response=response)
            cost = float(priced)
        except Exception as exc:  # litellm has no price for this model
            return self._unknown(first_line(exc))
        if not math.isfinite(cost) or cost < 0:  # litellm has billed some cached prompts below $0
            exact = self._table_price(prompt_tokens, completion_tokens, cached_tokens)
            if exact is None:
                return self._unknown(f"litellm priced a call at {cost!r}, which no bill can be")
            if not self._warned_bill:
                log.warning("litellm priced a call on %s at %r, which no bill can be: it is costed at the route's "
                            "price per token instead", self.model_route, cost)
                self._warned_bill = True
            return exact, "litellm"
        if cost == 0 and self._listed_without_price():
            return self._unknown("litellm lists it at $0, which is how it answers for a model it maps without prices")
        return cost, "litellm"

    def _listed_without_price(self) -> bool:
        if self._listed_at_zero is None:
            self._listed_at_zero = litellm_price(self.model_route) is None and litellm_maps(self.model_route)
        return self._listed_at_zero

    def _unknown(self, why: str) -> tuple[float | None, str | None]:
        """$0 on a route declared free; else unpriced, said once."""
        if self.route.free:
            return 0.0, "free"
        if not self._warned:
            log.warning("no price for %s (%s): its cost is reported as unpriced; set model.input_cost_per_token/"
                        "output_cost_per_token, or model.free=true if it costs nothing", self.model_route, why)
            self._warned = True
        return None, None

    def settings(self) -> dict[str, Any]:
        """The route's own price (``input_cost_per_token``, ``output_cost_per_token``, ``free``), or {}
        when litellm's map prices it: what a stored result's costs were worked out with."""
        r = self.route
        if r.input_cost_per_token is None and r.output_cost_per_token is None and not r.free:
            return {}
        return {"input_cost_per_token": _number(r.input_cost_per_token), "output_cost_per_token": _number(r.output_cost_per_token),
                "free": bool(r.free)}

    def reprice(self, reply: ModelReply) -> ModelReply:
        """A reply at today's price. A route's own price is not in the cache key (the answer does not
        depend on it), so a corrected one applies to replies cached before it, and it bills every
        prompt token alike (none at a cache rate). A cost litellm billed stays as billed. A cost from a
        price the route no longer has (its own, or ``free``), or none, is the route's price now: $0
        when it is declared free, litellm's table where that is exactly litellm's bill, else unknown.
        A $0 kept before its basis was, on a model litellm lists at $0, is unknown, as a new one is."""
        own = self._own(reply.prompt_tokens, reply.completion_tokens)
        cost: float | None
        cached: int | None
        if own is not None:
            cost, cached = own, 0
        else:
            cost, cached = reply.cost_usd, reply.cached_prompt_tokens
            kept = cost is not None and (reply.priced_by == "litellm" or (reply.priced_by is None and (
                cost > 0 or self._table() is not None or not litellm_maps(self.model_route))))
            if not kept:
                cost = 0.0 if self.route.free else self._table_price(reply.prompt_tokens, reply.completion_tokens, cached)
            elif cached is None and cost == self._table_price(reply.prompt_tokens, reply.completion_tokens, 0):
                cached = 0  # kept before its cached tokens were, at exactly the table's rate for all its tokens: none were
        if cost == reply.cost_usd and cached == reply.cached_prompt_tokens and (reply.input_cost_usd is not None or not cost):
            return reply
        # a reply cached before its prompt's cost was kept, or repriced: the prompt's share worked out again
        return dataclasses.replace(reply, cost_usd=cost, cached_prompt_tokens=cached,
                                   input_cost_usd=self.input_cost(reply.prompt_tokens, reply.completion_tokens, cost))

    def _table_price(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None) -> float | None:
        """litellm's table price of these tokens, where that is exactly what litellm bills them (no
        cached token, no tier, no reasoning rate), else None."""
        table = self._table()
        if table is None or table.source != "litellm" or not table.exact(prompt_tokens, cached_tokens):
            return None
        return table.of(prompt_tokens, completion_tokens)

    def input_cost(self, prompt_tokens: int, completion_tokens: int, total: float | None) -> float | None:
        """The share of a call's cost its prompt made: the total less the completion at the route's
        output price, within [0, total]. A provider's prompt discounts (cached tokens) and surcharges
        are all on the input side, so they stay there. None when the total or the route's price is
        unknown, or when this call's output was not billed at one price per token (litellm prices some
        routes' output by reasoning tokens, or higher above a prompt length, and a flat rate would move
        that surcharge onto the prompt); 0 for a call that cost nothing."""
        if total is None or not math.isfinite(total) or total < 0:
            return None
        if total == 0:
            return 0.0
        price = self._table()
        if price is None or not price.flat_output(prompt_tokens):
            return None
        return min(total, max(0.0, total - completion_tokens * price.output_per_token))


def _number(price: float | None) -> float | None:
    """A price as one number whatever its type: 1 and 1.0 are one price."""
    return None if price is None else float(price)
