"""What a response-cache entry must be to be replayed: a reply's shape, checked field by field."""
from __future__ import annotations

from typing import Any


def is_reply(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("tool_calls", []), list):
        return False
    if not isinstance(record.get("content"), str | None):
        return False
    calls_ok = all(isinstance(c, dict) and {"id", "name", "arguments"} <= set(c) for c in record.get("tool_calls", []))
    numbers_ok = all(isinstance(record.get(k, 0), int | float) and not isinstance(record.get(k, 0), bool)
                     for k in ("prompt_tokens", "completion_tokens", "latency_s", "attempts", "infra_s"))
    # an unpriced route's reply has no cost: null, which is not a $0 one
    # a cost no bill can be is read as unknown and worked out again (reply_from_record, Billing.reprice): refusing the
    # entry would pay for the call again
    cost = record.get("cost_usd", 0)
    cost_ok = cost is None or (isinstance(cost, int | float) and not isinstance(cost, bool))
    return calls_ok and numbers_ok and cost_ok
