"""Fault injection and timing knobs, configured per route in code (no environment variables).

A fault is decided by a named uniform keyed by (request digest, attempt), so the same request
fails the same way on the same attempt and a retry (attempt + 1) gets a fresh, reproducible draw.
The attempt is the ``attempt=<n>`` field of the user string when the harness sends one, else a
per-process count of identical requests seen so far.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from evoharness.compiler.sim.rng import uniform
from evoharness.compiler.sim.tiers import tier_for

FaultKind = Literal["timeout", "server_error", "rate_limit", "malformed"]
DEFAULT_TIME_SCALE = 0.1  # 2000 calls at concurrency 16: ~16 s (small) vs ~24 s (large) wall, measured on BFCL


@dataclass(frozen=True)
class SimConfig:
    time_scale: float = DEFAULT_TIME_SCALE  # multiplies the tier's simulated latency; 0 = no sleep
    timeout_rate: float = 0.0  # litellm.Timeout / HTTP 504
    server_error_rate: float = 0.0  # litellm.InternalServerError / HTTP 500
    rate_limit_rate: float = 0.0  # litellm.RateLimitError / HTTP 429
    malformed_rate: float = 0.0  # truncated output: invalid tool-call JSON or cut-off text
    shared_draws: bool = False  # variants share random numbers (a benchmark's true front); see rng.py
    # Which draw of the simulated world: a benchmark's replicate at temperature 0, where no request
    # field may change the answer. Set in code or per request (sim_faults), never by the harness.
    world: int = 0
    # The response surface: "documented" (the model card's formula) or "blind", drawn from
    # surface_seed (surface.py). Set in code or per request, never by the harness.
    surface: str = "documented"
    surface_seed: int = 0

    def __post_init__(self) -> None:
        if self.surface not in ("documented", "blind"):
            raise ValueError(f"surface={self.surface!r} must be 'documented' or 'blind'")
        if not 0 <= self.time_scale <= 1000:  # NaN and inf too: an infinite sleep is a hang, not a slow model
            raise ValueError(f"time_scale={self.time_scale} must be a number in [0, 1000] (0 disables sleeping)")
        rates = {f.name: getattr(self, f.name) for f in fields(self) if f.name.endswith("_rate")}
        for name, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name}={rate} must be a probability in [0, 1]")
        if sum(rates.values()) > 1.0:
            raise ValueError(f"fault rates {rates} sum to more than 1; lower some of them")


_LOCK = threading.Lock()
_CONFIGS: dict[str, SimConfig] = {}  # "" = default for every route, else a tier name
_ATTEMPTS: OrderedDict[str, int] = OrderedDict()  # request digest -> attempts seen, most recent last
MAX_TRACKED_REQUESTS = 50_000  # a retry follows its failure within seconds: older digests can go


def _key(route: str | None) -> str:
    return "" if route is None else tier_for(route).name


def configure_sim(route: str | None = None, config: SimConfig | None = None,
                  **changes: Any) -> SimConfig:
    """Set the config for one route ('sim/small') or, with route=None, the default for all.

    ``configure_sim("sim/small", timeout_rate=0.1)`` changes only the named knobs, starting from
    the route's current config.
    """
    with _LOCK:
        base = config or _CONFIGS.get(_key(route)) or _CONFIGS.get("") or SimConfig()
        unknown = set(changes) - {f.name for f in fields(SimConfig)}
        if unknown:
            raise TypeError(f"unknown sim knobs {sorted(unknown)}; known: "
                            f"{[f.name for f in fields(SimConfig)]}")
        updated = replace(base, **changes)
        _CONFIGS[_key(route)] = updated
        return updated


def with_overrides(config: SimConfig, overrides: Mapping[str, Any] | None) -> SimConfig:
    """A request's own ``sim_faults`` (e.g. from the model config's ``extra``) over the route's."""
    if not overrides:
        return config
    if not isinstance(overrides, Mapping):
        raise ValueError(f"sim_faults={overrides!r} must be a mapping of knob -> value")
    known = {f.name for f in fields(SimConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown sim_faults knobs {sorted(unknown)}; known: {sorted(known)}")
    changes: dict[str, Any] = {}
    for k, v in overrides.items():
        if k == "shared_draws":
            if not isinstance(v, bool):
                raise ValueError(f"sim_faults.shared_draws={v!r} must be true or false")
            changes[k] = v
        elif k in ("world", "surface_seed"):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"sim_faults.{k}={v!r} must be a whole number")
            changes[k] = v
        elif k == "surface":
            if v not in ("documented", "blind"):
                raise ValueError(f"sim_faults.surface={v!r} must be 'documented' or 'blind'")
            changes[k] = v
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"sim_faults.{k}={v!r} must be a number")
            changes[k] = float(v)
    return replace(config, **changes)


def sim_config(route: str) -> SimConfig:
    with _LOCK:
        return _CONFIGS.get(_key(route)) or _CONFIGS.get("") or SimConfig()


def reset_sim() -> None:
    """Back to defaults: no faults, default time scale, attempt counts forgotten."""
    with _LOCK:
        _CONFIGS.clear()
        _ATTEMPTS.clear()


def next_attempt(digest: str) -> int:
    with _LOCK:
        attempt = _ATTEMPTS.pop(digest, 0)
        _ATTEMPTS[digest] = attempt + 1
        while len(_ATTEMPTS) > MAX_TRACKED_REQUESTS:
            _ATTEMPTS.popitem(last=False)
        return attempt


def decide_fault(config: SimConfig, digest: str, attempt: int) -> FaultKind | None:
    u = uniform("fault", digest, attempt)
    edge = 0.0
    for kind, rate in (("timeout", config.timeout_rate), ("server_error", config.server_error_rate),
                       ("rate_limit", config.rate_limit_rate), ("malformed", config.malformed_rate)):
        edge += rate
        if u < edge:
            return kind  # type: ignore[return-value]
    return None
