"""The built-in simulated model (sim/small, sim/medium, sim/large): a documented test double.

Importing this package does not import litellm; ``register_sim_provider`` does. See
docs/sim-model.md for the model card.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evoharness.compiler.sim.engine import SimRequest, SimResult, simulate
    from evoharness.compiler.sim.errors import CallContext, CallErrorRates, call_error_rates
    from evoharness.compiler.sim.faults import SimConfig, configure_sim, reset_sim, sim_config
    from evoharness.compiler.sim.features import HarnessFeatures, extract_features
    from evoharness.compiler.sim.gold import GoldSource, StaticGoldSource, WorkloadGoldSource
    from evoharness.compiler.sim.handler import SimLLM
    from evoharness.compiler.sim.tiers import TIERS, Tier, tier_for

# Imported on first use: the provider registry imports this package to read the route's check and
# cache tag, and a warm run answered from the cache never needs the simulator itself.
_LAZY = {
    **dict.fromkeys(("SimRequest", "SimResult", "simulate"), "engine"),
    **dict.fromkeys(("CallContext", "CallErrorRates", "call_error_rates"), "errors"),
    **dict.fromkeys(("SimConfig", "configure_sim", "reset_sim", "sim_config"), "faults"),
    **dict.fromkeys(("HarnessFeatures", "extract_features"), "features"),
    **dict.fromkeys(("GoldSource", "StaticGoldSource", "WorkloadGoldSource"), "gold"),
    **dict.fromkeys(("TIERS", "Tier", "tier_for"), "tiers"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "TIERS", "CallContext", "CallErrorRates", "GoldSource", "HarnessFeatures", "SimConfig",
    "SimRequest", "SimResult", "StaticGoldSource", "Tier", "WorkloadGoldSource",
    "call_error_rates", "configure_sim", "extract_features", "register_sim_provider", "reset_sim",
    "sim_config", "simulate", "tier_for",
]


def register_sim_provider(gold: GoldSource | None = None) -> SimLLM:
    """Register the ``sim`` litellm provider (idempotent); imports litellm."""
    from evoharness.compiler.sim.provider import register_sim_provider as register

    return register(gold)
