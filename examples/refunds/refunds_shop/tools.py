"""The order desk's tools: plain functions; the environment passes the task's state as ``state``."""
from __future__ import annotations

from typing import Any, Literal

from evoharness.plugin import tool


@tool(group="orders")
def find_order(customer: str, state: dict[str, Any]) -> list[dict[str, Any]]:
    """List a customer's orders.

    Args:
        customer: The customer's email address, exactly as the user gave it.
    """
    return [{"order_id": oid, **o} for oid, o in sorted(state["orders"].items()) if o["customer"] == customer]


@tool(group="orders")
def order_status(order_id: str, state: dict[str, Any]) -> str:
    """The status of one order (paid, shipped, refunded or cancelled).

    Args:
        order_id: The order's id, e.g. A-17, as find_order returns it.
    """
    if order_id not in state["orders"]:
        raise KeyError(f"no order {order_id!r}")
    return str(state["orders"][order_id]["status"])


@tool(mutates_state=True, group="orders")
def refund(order_id: str, amount: float, reason: Literal["damaged", "late", "wrong_item", "other"], state: dict[str, Any]) -> str:
    """Refund part or all of a paid or shipped order.

    Args:
        order_id: The order's id.
        amount: How much to refund, in the order's currency; at most the order's total.
        reason: Why the order is refunded.
    """
    order = state["orders"].get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id!r}")
    if order["status"] not in ("paid", "shipped"):
        raise ValueError(f"order {order_id} is {order['status']}; only paid or shipped orders can be refunded")
    if amount > order["total"]:
        raise ValueError(f"{amount} is more than the order total {order['total']}")
    order["status"], order["refunded"], order["reason"] = "refunded", amount, reason
    return f"refunded {amount} on {order_id}"


@tool(mutates_state=True, group="orders")
def cancel_order(order_id: str, state: dict[str, Any]) -> str:
    """Cancel an order that has not shipped yet.

    Args:
        order_id: The order's id.
    """
    order = state["orders"].get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id!r}")
    if order["status"] != "paid":
        raise ValueError(f"order {order_id} is {order['status']}; only paid orders can be cancelled")
    order["status"] = "cancelled"
    return f"cancelled {order_id}"
