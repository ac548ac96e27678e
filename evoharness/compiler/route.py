"""A model's route: what is sent to the model besides the messages (ModelParams, part of a
variant's hash), how the route is reached (RouteSettings, not hashed), and the checks its settings
pass before any call is paid for."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.model_extra import check_extra

# a call's deadline: above an hour it is a typo, and inf would let one trickling reply hold a run forever
MAX_TIMEOUT_S = 3600.0
# retries of one call, each after a doubling backoff: past ten, an outage is not going to end within the run
MAX_RETRIES = 10
MAX_BACKOFF_S = 300.0  # one wait between attempts: the doubling stops here, so retries add minutes, never days


@dataclass(frozen=True)
class ModelParams:
    """What is sent to the model besides messages: part of the hash."""

    route: str
    temperature: float = 0.0
    max_tokens: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"route": self.route, "temperature": float(self.temperature), "max_tokens": self.max_tokens, "extra": dict(self.extra)}


@dataclass(frozen=True)
class RouteSettings:
    """How the route is reached; not seen by the model, so not hashed."""

    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    retries: int = 3
    backoff_s: float = 0.5
    concurrency: int = 8
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    free: bool = False  # a route with no price costs $0 rather than an unknown amount
    send_episode_id: bool = False  # the episode id goes out as the `user` field only on routes that opt in
    # OpenAI's `seed`, per sample, where litellm says the provider takes it; false for a server that
    # refuses it all the same (the seed stays in the response-cache key: samples remain separate calls)
    send_seed: bool = True
    revision: str | None = None  # the deployment's version: part of every response-cache key, never of the variant's hash

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check_route_settings(model: Mapping[str, Any], *, path: str = "model") -> None:
    """How the route is reached must make sense before any call is paid for (``path``: where the
    settings are in the config, for the error)."""
    checks: tuple[tuple[str, Any, bool, str], ...] = (
        ("timeout_s", model.get("timeout_s", 60.0), 0 < _number(model.get("timeout_s", 60.0)) <= MAX_TIMEOUT_S,
         f"use a positive number of seconds, at most {MAX_TIMEOUT_S:.0f}"),
        ("retries", model.get("retries", 3), 0 <= _whole(model.get("retries", 3)) <= MAX_RETRIES, f"use 0 to {MAX_RETRIES}"),
        ("backoff_s", model.get("backoff_s", 0.5), 0 <= _number(model.get("backoff_s", 0.5)) <= MAX_BACKOFF_S,
         f"use 0 or more seconds, at most {MAX_BACKOFF_S:.0f}"),
        ("concurrency", model.get("concurrency", 8), _whole(model.get("concurrency", 8)) >= 1, "use 1 or more calls in flight"),
        ("max_tokens", model.get("max_tokens"), model.get("max_tokens") is None or _whole(model.get("max_tokens")) >= 1,
         "use a positive token count, or null for the provider's default"),
    )
    for key, value, ok, fix in checks:
        if not ok:
            raise ConfigError(f"{path}.{key}", f"{value!r} is out of range", fix)
    base = model.get("api_base")
    if base is not None and (urlparse(str(base)).scheme not in ("http", "https") or not _host(str(base))):
        raise ConfigError(f"{path}.api_base", f"{base!r} is not an http(s) URL with a host",
                          "use e.g. http://127.0.0.1:8000/v1, or null for the provider's own")
    for key in ("input_cost_per_token", "output_cost_per_token"):
        if model.get(key) is not None and not _number(model.get(key)) >= 0:
            raise ConfigError(f"{path}.{key}", f"{model.get(key)!r} is negative or not a number",
                              "use a finite price of 0 or more USD per token, or null")
    check_extra(f"{path}.extra", str(model.get("route") or ""), model.get("extra") or {})


def model_route(model: Mapping[str, Any], *, path: str = "model") -> tuple[ModelParams, RouteSettings]:
    """A model config's params and route settings, checked (``path``: where it is in the config)."""
    temperature = float(model.get("temperature", 0.0))
    if not 0.0 <= temperature <= 2.0:
        raise ConfigError(f"{path}.temperature", f"must be in [0, 2], got {temperature}", "pick a temperature between 0 and 2")
    route = model.get("route")
    if not route or "/" not in str(route):
        raise ConfigError(f"{path}.route", f"not a litellm model string: {route!r}",
                          "use provider/model, e.g. openai/gpt-4o-mini or sim/small")
    check_route_settings(model, path=path)
    params = ModelParams(route=str(route), temperature=temperature, max_tokens=model.get("max_tokens"),
                         extra=dict(model.get("extra") or {}))
    settings = RouteSettings(
        api_base=model.get("api_base"),
        api_key_env=model.get("api_key_env"),
        timeout_s=float(model.get("timeout_s", 60.0)),
        retries=int(model.get("retries", 3)),
        backoff_s=float(model.get("backoff_s", 0.5)),
        concurrency=int(model.get("concurrency", 8)),
        input_cost_per_token=model.get("input_cost_per_token"),
        output_cost_per_token=model.get("output_cost_per_token"),
        free=bool(model.get("free", False)),
        send_episode_id=bool(model.get("send_episode_id", False)),
        send_seed=bool(model.get("send_seed", True)),
        revision=None if model.get("revision") is None else str(model.get("revision")),
    )
    return params, settings


def _host(url: str) -> str | None:
    try:
        return urlparse(url).hostname
    except ValueError:  # a port that is not a number, an unbalanced IPv6 bracket
        return None


def _number(value: Any) -> float:
    """``value`` as a float, NaN for anything that is not a finite number (NaN fails every comparison)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return float("nan")


def _whole(value: Any) -> float:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else float("nan")
