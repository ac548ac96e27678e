"""A model's reply: what the agent loop reads (content, native tool calls, usage, cost, latency),
the record the response cache stores for it, and the provider's own account of its latency."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NativeCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it; decoding can fail and is the harness's job


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[NativeCall, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the route has no price (unpriced), never taken as $0
    latency_s: float  # the successful attempt's time inside the provider
    cached: bool = False
    latency_source: str = "client"  # "provider": the provider reported its own processing time; "client": our stopwatch
    attempts: int = 1
    infra_s: float = 0.0  # failed attempts and backoff before it: an outage's cost, never the variant's latency
    unparseable: str | None = None  # the provider answered, but with a reply litellm cannot read: the model's mistake
    input_cost_usd: float | None = None  # the prompt's share of cost_usd; None when unknown (or a reply cached without it)
    # prompt tokens billed at the provider's cache rate: those it read from its prompt cache, when its
    # price came from litellm (a route's own price bills every token alike: 0); None for a reply cached
    # before the count was kept
    cached_prompt_tokens: int | None = 0
    priced_by: str | None = None  # what its cost was worked out from (PRICED_BY); None: unpriced, or kept before it was
    key: str = ""  # the request's response-cache key ("" without a cache): what a replayed episode checks is still there


PRICED_BY = ("route", "litellm", "free")  # the route's own price, litellm's for the reply, a route declared free
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")  # ASCII digits only: no sign, exponent, underscore or other script
PROCESSING_HEADERS = ("openai-processing-ms", "llm_provider-openai-processing-ms")


def provider_latency(response: Any, *, measured: float) -> float | None:
    """Seconds the provider says it spent on the request, from the response headers litellm keeps
    (OpenAI's ``openai-processing-ms``; litellm prefixes a provider's headers with ``llm_provider-``),
    or None when it did not say, or said something that cannot be its time: not a plain decimal
    number of milliseconds, or more than the ``measured`` round trip it is part of."""
    headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers")
    if not isinstance(headers, Mapping):
        return None
    for name in PROCESSING_HEADERS:
        value = headers.get(name)
        if not isinstance(value, str) or not _DECIMAL.fullmatch(value.strip()):
            continue
        seconds = float(value) / 1000.0
        if seconds <= measured:
            return seconds
    return None


def record_from_response(response: Any, latency: float) -> dict[str, Any]:
    """The reply as the response cache stores it: content, tool calls, finish reason, usage, latency."""
    choice = response.choices[0]
    message = choice.message
    calls = []
    for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
        fn = tc.function
        calls.append({"id": tc.id or f"call_{i}", "name": fn.name or "", "arguments": fn.arguments or ""})
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    return {
        "content": message.content,
        "tool_calls": calls,
        "finish_reason": choice.finish_reason or "",
        "prompt_tokens": prompt_tokens,
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "cached_prompt_tokens": min(prompt_tokens, provider_cached_tokens(usage)),
        "latency_s": latency,
    }


def provider_cached_tokens(usage: Any) -> int:
    """Prompt tokens the provider bills at a cache rate: those it read from its prompt cache (OpenAI's
    ``prompt_tokens_details.cached_tokens``, where litellm puts Anthropic's and DeepSeek's reads too,
    else ``cache_read_input_tokens``) and those it wrote to it (Anthropic's
    ``cache_creation_input_tokens``, billed above the input rate); 0 when the usage says nothing readable."""
    details = getattr(usage, "prompt_tokens_details", None)
    read = next((n for v in (getattr(details, "cached_tokens", None), getattr(usage, "cache_read_input_tokens", None))
                 if (n := _tokens(v))), 0)
    return read + _tokens(getattr(usage, "cache_creation_input_tokens", None))


def _cost(value: Any) -> float | None:
    """A stored cost: a number a bill can be (finite, not below $0), else unknown."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:
        return None
    return cost if math.isfinite(cost) and cost >= 0 else None


MAX_TOKENS = 10**9  # more tokens than any model's window: a stored count above it is not one


def _tokens(value: Any) -> int:
    """A stored token count: a whole number within [0, MAX_TOKENS], else 0 (a stored record is data)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0
    return int(value) if 0 <= value <= MAX_TOKENS else 0


def _stored_count(value: Any, *, of: int) -> int | None:
    """A stored count of ``of``'s tokens: an integer within [0, of], else unknown (missing: kept before it was)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= of else None


def _share(value: Any, of: Any) -> float | None:
    """``value`` as a share of the cost ``of``: a number in [0, of], else unknown (a stored record is data)."""
    numbers = [v for v in (value, of) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) < 2:
        return None
    try:
        share, whole = float(value), float(of)
    except OverflowError:  # an integer too large for a float
        return None
    return share if math.isfinite(whole) and 0 <= share <= whole else None


def reply_from_record(rec: Mapping[str, Any], *, cached: bool, key: str = "") -> ModelReply:
    """A stored reply (from the cache, or just recorded) as the agent loop reads it."""
    return ModelReply(
        content=rec.get("content"),
        tool_calls=tuple(NativeCall(c["id"], c["name"], c["arguments"]) for c in rec.get("tool_calls", [])),
        finish_reason=rec.get("finish_reason", ""),
        prompt_tokens=_tokens(rec.get("prompt_tokens", 0)),
        completion_tokens=_tokens(rec.get("completion_tokens", 0)),
        cost_usd=_cost(rec.get("cost_usd", 0.0)),
        input_cost_usd=_share(rec.get("input_cost_usd"), rec.get("cost_usd", 0.0)),
        cached_prompt_tokens=_stored_count(rec.get("cached_prompt_tokens"), of=_tokens(rec.get("prompt_tokens", 0))),
        priced_by=rec.get("priced_by") if rec.get("priced_by") in PRICED_BY else None,
        latency_s=float(rec.get("latency_s", 0.0)),
        cached=cached,
        latency_source=str(rec.get("latency_source", "client")),
        attempts=int(rec.get("attempts", 1)),
        infra_s=float(rec.get("infra_s", 0.0)),
        unparseable=rec.get("unparseable"),
        key=key,
    )
