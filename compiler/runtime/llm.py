"""Lazy litellm import (its price map would otherwise be fetched from the network at import), and
the model providers: litellm custom providers registered by name.

A model provider is a callable that registers a litellm custom provider (an entry in
``litellm.custom_provider_map``, plus prices if it has them) and may be called any number of
times: ensure_providers calls it before model calls. A route ``<provider>/<model>`` whose
provider is registered here goes to it; any other route (``openai/...``) is litellm's own::

    from compiler.runtime.llm import register_model_provider

    @register_model_provider("mine")
    def register_mine() -> None:
        lm = litellm_module()
        if not any(e["provider"] == "mine" for e in lm.custom_provider_map):
            lm.custom_provider_map = [*lm.custom_provider_map, {"provider": "mine", "custom_handler": MyLLM()}]
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import lru_cache
from types import ModuleType

from compiler.plugins import NamedRegistry

ProviderRegistrar = Callable[[], object]

MODEL_PROVIDERS: NamedRegistry[ProviderRegistrar] = NamedRegistry(
    "model provider", builtins={"sim": "compiler.sim.provider:register_sim_provider"}, decorator="@register_model_provider"
)


def register_model_provider(name: str) -> Callable[[ProviderRegistrar], ProviderRegistrar]:
    """Decorator: make routes ``<name>/<model>`` go to the provider the decorated callable registers."""
    return MODEL_PROVIDERS.register(name)


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


def ensure_providers(route: str | None = None) -> ModuleType:
    """litellm with the model providers registered: every one, or only the one ``route`` needs
    (none for a route litellm serves itself)."""
    lm = litellm_module()
    if route is None:
        names = MODEL_PROVIDERS.names()
    else:
        provider = route.partition("/")[0]
        names = [provider] if provider in MODEL_PROVIDERS else []
    for name in names:
        MODEL_PROVIDERS.get(name)()
    return lm
