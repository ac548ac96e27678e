"""The litellm custom provider ``sim``: routes sim/small, sim/medium, sim/large.

This module is what the provider registry imports to ask for the route's check and cache tag, so it
imports no litellm: registering the provider does (compiler/sim/handler.py holds the handler).
"""
from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoharness.compiler.sim.gold import GoldSource
from evoharness.compiler.sim.tiers import PROVIDER, TIERS

if TYPE_CHECKING:
    from evoharness.compiler.sim.handler import SimLLM

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # whoever imports litellm next: no price-map download


def register_sim_provider(gold: GoldSource | None = None) -> SimLLM:
    """Register (once) the ``sim`` provider and its prices with litellm; returns the handler.

    Calling again returns the same handler; passing ``gold`` swaps its gold source (tests).
    """
    import litellm

    from evoharness.compiler.sim.handler import SimLLM, _register_http_routes, model_info

    for entry in litellm.custom_provider_map:
        existing = entry.get("custom_handler")
        if entry.get("provider") == PROVIDER and isinstance(existing, SimLLM):
            if gold is not None:
                existing.gold = gold
            return existing
    handler = SimLLM(gold)
    litellm.custom_provider_map = [e for e in litellm.custom_provider_map
                                   if e.get("provider") != PROVIDER]
    litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": handler})
    litellm.register_model({f"{PROVIDER}/{name}": model_info(name) for name in TIERS})
    _register_http_routes()
    return handler


def check_sim_params(route: str, params: Mapping[str, Any]) -> None:
    """The provider's pre-run check (see evoharness.compiler.runtime.llm.register_model_provider)."""
    from evoharness.compiler.sim.faults import SimConfig, with_overrides

    name = route.partition("/")[2]
    if name not in TIERS:
        raise ValueError(f"route {route!r}: the simulator has no model {name!r}; it has {sorted(TIERS)}")
    try:
        with_overrides(SimConfig(), params.get("sim_faults"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"extra.sim_faults: {exc}") from None


# bump when the same request may get another answer (2: draws keyed by the harness; 3: by the request's seed)
BEHAVIOUR_VERSION = 3


def sim_cache_tag(route: str) -> str:
    """Besides the request, the simulator's own code and the route's configured draws decide the
    answer: an edited simulator is never answered from the entries of the one before."""
    from evoharness.compiler.sim.faults import sim_config

    config = sim_config(route)
    return (f"sim-v{BEHAVIOUR_VERSION};source={source_hash()[:16]};shared_draws={config.shared_draws};world={config.world};"
            f"surface={config.surface}:{config.surface_seed}")


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over the simulator's source files (compiler/sim/*.py), in name order."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


register_sim_provider.check = check_sim_params  # type: ignore[attr-defined]
register_sim_provider.cache_tag = sim_cache_tag  # type: ignore[attr-defined]
register_sim_provider.params = frozenset({"sim_faults"})  # type: ignore[attr-defined]  # its own model.extra parameters


