"""The BFCL multi-turn tool catalog: bfcl-eval's function docs as ToolSpecs, its backend
classes, and the parser that turns BFCL ground-truth call strings into keyword ToolCalls.

Everything here is read from the installed bfcl-eval package and memoized; nothing is copied.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
from collections.abc import Mapping
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Any

from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
from bfcl_eval.constants.executable_backend_config import (
    CLASS_FILE_PATH_MAPPING,
    MULTI_TURN_FUNC_DOC_FILE_MAPPING,
)

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.toolspec import ToolSpec

# The classes of the multi-turn categories. bfcl-eval's mappings also list the web-search and
# memory backends, which belong to its agentic categories and are not part of this workload.
MULTI_TURN_CLASSES: tuple[str, ...] = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)

# Which tools mutate state: a documented per-class list. A tool is listed when a call can change
# what BFCL's state checker compares (the instance's public attributes) or the file system's
# working directory (`cd`: private, but it changes what every later path refers to). Excluded on
# purpose: draws from a backend's private RNG (e.g. get_current_speed) and the memo cache that
# get_flight_cost refreshes; both are lookups to the user. The list was derived by reading the
# backends and is cross-checked against gold replays in tests/compiler/workloads/test_bfcl_tools.py: every
# gold call that changed a public attribute (or the working directory) is of a listed tool, and
# every listed tool that gold uses changed state at least once.
_WRITERS: Mapping[str, frozenset[str]] = MappingProxyType({
    "GorillaFileSystem": frozenset({"cd", "cp", "echo", "mkdir", "mv", "rm", "rmdir", "touch"}),
    "MathAPI": frozenset(),
    "MessageAPI": frozenset({"add_contact", "delete_message", "message_login", "send_message"}),
    "TwitterAPI": frozenset({
        "authenticate_twitter", "comment", "follow_user", "mention", "post_tweet", "retweet",
        "unfollow_user",
    }),
    "TicketAPI": frozenset({
        "close_ticket", "create_ticket", "edit_ticket", "logout", "resolve_ticket", "ticket_login",
    }),
    "TradingBot": frozenset({
        "add_to_watchlist", "cancel_order", "fund_account", "place_order",
        "remove_stock_from_watchlist", "trading_login", "trading_logout", "withdraw_funds",
    }),
    "TravelAPI": frozenset({
        "authenticate_travel", "book_flight", "cancel_booking", "purchase_insurance",
        "register_credit_card", "set_budget_limit",
    }),
    "VehicleControlAPI": frozenset({
        "activateParkingBrake", "adjustClimateControl", "fillFuelTank", "lockDoors",
        "pressBrakePedal", "releaseBrakePedal", "setCruiseControl", "setHeadlights",
        "set_navigation", "startEngine",
    }),
})

# BFCL's docs use Python type names; JSON schema spells them differently. "any" has no JSON
# schema equivalent, so the type key is dropped (an unconstrained schema).
_TYPE_NAMES: Mapping[str, str | None] = MappingProxyType(
    {"dict": "object", "float": "number", "tuple": "array", "any": None}
)


class BfclToolError(ValueError):
    """A BFCL tool name or call string that this workload cannot resolve."""


def _json_type(value: Any) -> Any:
    if isinstance(value, list):
        kept = [_TYPE_NAMES.get(t, t) for t in value]
        return [t for t in kept if t is not None] or None
    return _TYPE_NAMES.get(value, value)


def to_json_schema(node: Any) -> Any:
    """Convert one BFCL parameter schema node (recursively) to JSON schema."""
    if not isinstance(node, Mapping):
        return json.loads(json.dumps(node))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            converted = _json_type(value)
            if converted is not None:
                out["type"] = converted
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = to_json_schema(value)
        else:
            out[key] = json.loads(json.dumps(value))
    return out


def _read_func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    path = MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    with open(path, encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def _to_spec(class_name: str, doc: Mapping[str, Any]) -> ToolSpec:
    parameters = to_json_schema(doc.get("parameters") or {})
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    return ToolSpec(
        name=doc["name"],
        description=doc.get("description", ""),
        parameters=parameters,
        mutates_state=doc["name"] in _WRITERS[class_name],
        group=class_name,
    )


@lru_cache(maxsize=1)
def load_bfcl_tool_specs() -> tuple[ToolSpec, ...]:
    """All multi-turn tools, in bfcl-eval's class order then doc order."""
    specs = tuple(
        _to_spec(class_name, doc)
        for class_name in MULTI_TURN_CLASSES
        for doc in _read_func_docs(class_name)
    )
    names = [spec.name for spec in specs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        # Dispatch is by bare name, exactly as in bfcl-eval; a clash would make it ambiguous.
        raise BfclToolError(f"tool names {duplicates} occur in more than one BFCL class")
    return specs


@lru_cache(maxsize=1)
def bfcl_tool_catalog() -> Mapping[str, ToolSpec]:
    """The catalog as a read-only mapping name -> ToolSpec."""
    return MappingProxyType({spec.name: spec for spec in load_bfcl_tool_specs()})


def tool_spec(name: str) -> ToolSpec:
    catalog = bfcl_tool_catalog()
    if name not in catalog:
        raise BfclToolError(
            f"unknown BFCL tool {name!r}; it is not in the multi-turn function docs of "
            f"{', '.join(MULTI_TURN_CLASSES)}"
        )
    return catalog[name]


def tool_owner(name: str) -> str:
    """The backend class that implements tool ``name``."""
    return tool_spec(name).group


@cache
def tools_of_class(class_name: str) -> tuple[str, ...]:
    if class_name not in MULTI_TURN_CLASSES:
        raise BfclToolError(
            f"unknown BFCL class {class_name!r}; expected one of {list(MULTI_TURN_CLASSES)}"
        )
    return tuple(spec.name for spec in load_bfcl_tool_specs() if spec.group == class_name)


@cache
def backend_class(class_name: str) -> type:
    """The backend class, imported through bfcl-eval's own CLASS_FILE_PATH_MAPPING."""
    if class_name not in MULTI_TURN_CLASSES:
        raise BfclToolError(
            f"unknown BFCL class {class_name!r}; expected one of {list(MULTI_TURN_CLASSES)}"
        )
    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
    cls = getattr(module, class_name)
    assert isinstance(cls, type)
    return cls


@cache
def tool_signature(name: str) -> inspect.Signature:
    """The backend method's signature without ``self``."""
    method = getattr(backend_class(tool_owner(name)), name)
    signature = inspect.signature(method)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    return signature.replace(parameters=params)


def parse_call(source: str) -> ToolCall:
    """Parse a BFCL call string such as ``sort('final_report.pdf')`` into a keyword ToolCall.

    Only the argument nodes are evaluated, with ``ast.literal_eval``; positional arguments are
    named through the backend method's signature.
    """
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as exc:
        raise BfclToolError(f"cannot parse BFCL call {source!r}: {exc.msg}") from exc
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise BfclToolError(f"BFCL call {source!r} is not of the form name(arg=value, ...)")
    name = node.func.id
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except ValueError as exc:
        raise BfclToolError(f"BFCL call {source!r} has a non-literal argument: {exc}") from exc
    if any(kw.arg is None for kw in node.keywords):
        raise BfclToolError(f"BFCL call {source!r} uses **kwargs; only literal arguments work")
    try:
        bound = tool_signature(name).bind(*args, **kwargs)
    except TypeError as exc:
        raise BfclToolError(f"BFCL call {source!r} does not fit {name}{tool_signature(name)}: "
                            f"{exc}") from exc
    return ToolCall(name=name, arguments=dict(bound.arguments))


def render_call(call: ToolCall) -> str:
    """The call as BFCL writes it: ``name(arg=repr(value), ...)``."""
    args = ",".join(f"{key}={value!r}" for key, value in call.arguments.items())
    return f"{call.name}({args})"
