"""Escalation: the rest of a user turn handed to a stronger model when the turn signals trouble.

A cheap model runs the loop; when one of the configured triggers fires, every later model call of
that turn goes to the escalation route, priced and timed as that route's, and the next turn starts
on the cheap model again. The triggers are what a tool loop can see:

* ``tool_error``: a tool call of the turn came back as an error;
* ``max_turns``: the turn used up ``max_turns`` calls without a final answer (the stronger model
  gets another ``max_turns`` calls);
* ``review``: a ``before_final`` workflow step (a check before the final answer) is sent.

Pure: the compiler builds it from ``agent.escalation``, the runtime applies it, and the variant's
hash covers it (the route's parameters and the triggers, not how the route is reached).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.route import ModelParams, RouteSettings, model_route
from evoharness.compiler.secrets import find_secret

TRIGGERS = ("tool_error", "max_turns", "review")
PATH = "agent.escalation"


@dataclass(frozen=True)
class Escalation:
    """Where a troubled turn goes, and what counts as trouble.

    Attributes:
        model: The stronger route's parameters (hashed).
        route: How it is reached (not hashed).
        on: The triggers, in ``TRIGGERS`` order.
    """

    model: ModelParams
    route: RouteSettings
    on: tuple[str, ...]

    def hashed(self) -> dict[str, Any]:
        return {"model": self.model.to_dict(), "on": list(self.on)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.hashed(), "route": self.route.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Escalation:
        return cls(model=ModelParams(**data["model"]), route=RouteSettings(**data.get("route", {})), on=tuple(data["on"]))


def escalation(config: Mapping[str, Any] | None) -> Escalation | None:
    """The escalation ``agent.escalation`` describes, checked; None when it names no model."""
    config = dict(config or {})
    unknown = sorted(set(config) - {"model", "on"})
    if unknown:
        raise ConfigError(f"{PATH}.{unknown[0]}", "is not an escalation setting", f"use {PATH}.model and {PATH}.on")
    on = config.get("on", list(TRIGGERS[:2]))
    if isinstance(on, str) or not isinstance(on, (list, tuple)) or not on:
        raise ConfigError(f"{PATH}.on", f"must be a non-empty list of triggers, got {on!r}", f"use some of {list(TRIGGERS)}")
    bad = [t for t in on if t not in TRIGGERS]
    if bad:
        raise ConfigError(f"{PATH}.on", f"unknown trigger {bad[0]!r}", f"use some of {list(TRIGGERS)}")
    model = config.get("model")
    if model is None:
        return None
    if not isinstance(model, Mapping):
        raise ConfigError(f"{PATH}.model", f"must be a model config, got {model!r}",
                          f"pick one from the model group: +model@{PATH}.model=sim_large")
    leaked = find_secret({"model": dict(model)})
    if leaked:
        raise ConfigError(f"{PATH}.{leaked}", "looks like a credential; it would be written into the compiled variant and every record",
                          f"put the NAME of an environment variable in {PATH}.model.api_key_env instead")
    params, route = model_route(model, path=f"{PATH}.model")
    return Escalation(model=params, route=route, on=tuple(t for t in TRIGGERS if t in on))
