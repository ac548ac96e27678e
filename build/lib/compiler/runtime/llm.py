"""Lazy litellm import: its price map would otherwise be fetched from the network at import."""
from __future__ import annotations

import logging
import os
from functools import lru_cache
from types import ModuleType


@lru_cache(maxsize=1)
def litellm_module() -> ModuleType:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # Hydra sets the root logger to INFO; litellm would then log every call.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


def ensure_providers() -> ModuleType:
    """litellm with the project's custom providers (the simulated model) registered."""
    lm = litellm_module()
    from compiler.sim.provider import register_sim_provider

    register_sim_provider()
    return lm
