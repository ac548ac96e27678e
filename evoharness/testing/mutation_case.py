"""MutationCase: a context a mutator is tested in, and the small order-desk case the mutator
contract uses when a plugin gives none of its own."""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evoharness.compiler.catalog import build_catalog, select_tools
from evoharness.compiler.runtime.workload import Failure
from evoharness.search.genome import Genome, PoolEntry, initial_pools
from evoharness.search.mutators.base import FailedEpisode, MutationContext, ToolLoad


@dataclass(frozen=True)
class MutationCase:
    """A ``MutationContext`` with what the contract needs to compile the pools a mutator grows.

    Attributes:
        context: The context the mutator proposes from.
        tool: The tool catalog config (``tool.source``, ``tool.definitions``, ...) the context's tools came from.
        models: Model configs by name: every name in ``context.models``, and the pools' base model.
        task_values: Values that appear only as task values in the evidence (``Failure.expected``
            and ``got``, tool errors, a teacher's calls): no proposal may carry one.
        name: A label for test ids.
    """

    context: MutationContext
    tool: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]
    task_values: tuple[str, ...] = ()
    name: str = "case"


def _param(kind: str, description: str) -> dict[str, Any]:
    return {"type": kind, "description": description}


DESK_TOOLS: dict[str, Any] = {
    "source": None,
    "definitions": {
        "find_order": {"description": "List a customer's orders.", "group": "orders",
                       "parameters": {"type": "object", "properties": {"customer": _param("string", "The customer's email.")},
                                      "required": ["customer"]}},
        "refund": {"description": "Refund a paid or shipped order.", "mutates_state": True, "group": "orders",
                   "parameters": {"type": "object", "properties": {"order_id": _param("string", "The order's id."),
                                                                   "amount": _param("number", "How much to refund.")},
                                  "required": ["order_id", "amount"]}},
        "cancel_order": {"description": "Cancel an order that has not shipped.", "mutates_state": True, "group": "orders",
                         "parameters": {"type": "object", "properties": {"order_id": _param("string", "The order's id.")},
                                        "required": ["order_id"]}},
        "order_status": {"description": "The status of one order.", "group": "orders",
                         "parameters": {"type": "object", "properties": {"order_id": _param("string", "The order's id.")},
                                        "required": ["order_id"]}},
    },
    "overrides": {},
}

DESK_AGENT: dict[str, Any] = {
    "name": "order_desk",
    "tool_format": "json",
    "tools": ["find_order", "refund", "cancel_order", "order_status"],
    "max_turns": 8,
    "prompt_sections": {
        "role": "You are {{ agent_name }}, an order-desk assistant.",
        "policy": "Look an order up before you change it.",
        "style": "Answer in one sentence.",
    },
    "workflow": [
        {"name": "look_up", "instructions": "Find the customer's orders."},
        {"name": "act", "instructions": "Make the change the customer asked for.", "after": ["look_up"]},
        {"name": "confirm", "instructions": "Read the order's status back.", "after": ["act"], "optional": True,
         "trigger": "before_final"},
    ],
    "vars": {},
}

DESK_MODELS: dict[str, dict[str, Any]] = {"base": {"route": "sim/small", "temperature": 0.0}, "sim_large": {"route": "sim/large"},
                                          "sim_medium": {"route": "sim/medium"}}
# USD per input token, as a search reads them from the price table: the incumbent's model is the cheapest here
DESK_PRICES: dict[str, float] = {"base": 1e-7, "sim_medium": 6e-7, "sim_large": 3e-6}
DESK_VALUES = ("Z-90817", "73.25", "quux4711@example.org", "Q-5550")


def _failed(task_id: str, *failures: Failure, errors: Sequence[str] = ()) -> FailedEpisode:
    # the detail is free text no mutator may parse: it names nothing a rule could be made from
    return FailedEpisode(task_id=task_id, detail="turn 0: the scorer's own wording", tool_errors=tuple(errors), failures=failures)


def order_desk_case() -> MutationCase:
    """An order desk whose failed episodes ask for each kind of edit: a wrong value, a missed call
    to a tool the front's toolset leaves out, a missing argument, an unneeded call, turns that ran
    out of model calls. One configured
    model is not pooled yet; one tool's results are long."""
    agent = copy.deepcopy(DESK_AGENT)
    tools = {s.name: s for s in select_tools(agent["tools"], build_catalog(DESK_TOOLS))}
    pools = initial_pools(agent, models=["sim_large"], temperatures=[0.0, 0.5], base_model="base", base_temperature=0.0)
    pools = replace(pools, toolsets=(*pools.toolsets, PoolEntry(["find_order", "refund", "cancel_order"], "contract")))
    evidence = (
        _failed("desk/1", Failure("wrong_value", "refund", "amount", 73.25, 37.25, 0),
                errors=("refund: 73.25 is more than the order total",)),
        _failed("desk/2", Failure("missed_call", "order_status", None, {"order_id": "Z-90817"}, None, 1),
                Failure("non_termination", turn=1)),
        _failed("desk/3", Failure("missing_argument", "find_order", "customer", "quux4711@example.org", None, 0),
                Failure("no_recovery", "find_order", None, None, "missing argument 'customer'", 0)),
        _failed("desk/4", Failure("unneeded_call", "cancel_order", None, None, {"order_id": "Q-5550"}, 0),
                Failure("non_termination", turn=0)),
        _failed("desk/5", Failure("wrong_value", "refund", "amount", 73.25, 7.0, 0)),
    )
    # the front member's tool output on train: order lookups return whole order histories
    load = {"find_order": ToolLoad(calls=12, chars=54_000, longest=9_800, episodes=5, turns=20),
            "refund": ToolLoad(calls=3, chars=240, longest=90, episodes=5, turns=20)}
    context = MutationContext(agent=agent, tools=tools, pools=pools, front=(Genome(toolset=1), Genome()), evidence=evidence,
                              models=tuple(DESK_MODELS), round=1, load=load,
                              prices=dict(DESK_PRICES))
    return MutationCase(context=context, tool=copy.deepcopy(DESK_TOOLS), models=copy.deepcopy(DESK_MODELS), task_values=DESK_VALUES,
                        name="order_desk")
