"""Lazy litellm import (its price map would otherwise be fetched from the network at import), and
the model providers: litellm custom providers registered by name.

A model provider is a callable that registers a litellm custom provider (an entry in
``litellm.custom_provider_map``, plus prices if it has them) and may be called any number of
times: ensure_providers calls it before model calls. A route ``<provider>/<model>`` whose
provider is registered here goes to it; any other route (``openai/...``) is litellm's own::

    from evoharness.compiler.runtime.llm import register_model_provider

    @register_model_provider("mine")
    def register_mine() -> None:
        lm = litellm_module()
        if not any(e["provider"] == "mine" for e in lm.custom_provider_map):
            lm.custom_provider_map = [*lm.custom_provider_map, {"provider": "mine", "custom_handler": MyLLM()}]
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any

from evoharness.compiler.plugins import NamedRegistry

ProviderRegistrar = Callable[[], object]

MODEL_PROVIDERS: NamedRegistry[ProviderRegistrar] = NamedRegistry("model provider", decorator="@register_model_provider")


ParamsCheck = Callable[[str, Mapping[str, Any]], None]  # (route, completion params) -> raises ValueError
CacheTag = Callable[[str], str]  # route -> what else decides the answer


def register_model_provider(name: str, *, check: ParamsCheck | None = None, cache_tag: CacheTag | None = None,
                            params: Collection[str] = ()) -> Callable[[ProviderRegistrar], ProviderRegistrar]:
    """Decorator: make routes ``<name>/<model>`` go to the provider the decorated callable registers.
    ``check(route, params)`` raises ValueError for a model name or parameter the provider cannot serve,
    so the mistake is reported before the run instead of on every call. ``cache_tag(route)`` names
    whatever besides the request decides the provider's answer (its version, a server-side mode):
    it is part of every response-cache key, so a changed provider is never answered from old entries.
    ``params`` names the provider's own ``model.extra`` parameters, each ``<name>_<param>``
    (compiler/model_extra.py): any other key besides the generation parameters is refused.

    Args:
        name: The route prefix the provider serves (``<name>/<model>``).
        check: ``(route, params) -> None``; raises ValueError for what the provider cannot serve.
        cache_tag: ``route -> str``; what else decides the answer, part of every cache key.
        params: The provider's own ``model.extra`` parameter names.

    Raises:
        Never raises here; ``check``'s ValueError is reported before the run as a ConfigError on
        the model config.
    """
    def wrap(registrar: ProviderRegistrar) -> ProviderRegistrar:
        registrar.params = frozenset(params)  # type: ignore[attr-defined]
        if check is not None:
            registrar.check = check  # type: ignore[attr-defined]
        if cache_tag is not None:
            registrar.cache_tag = cache_tag  # type: ignore[attr-defined]
        return MODEL_PROVIDERS.register(name)(registrar)
    return wrap


def provider_cache_tag(route: str) -> str | None:
    """The registered provider's cache tag for ``route`` (None for routes litellm serves itself)."""
    provider = route.partition("/")[0]
    tag = getattr(MODEL_PROVIDERS.get(provider), "cache_tag", None) if provider in MODEL_PROVIDERS else None
    return None if tag is None else str(tag(route))


def provider_params(route: str) -> frozenset[str]:
    """The ``model.extra`` parameters the route's registered provider declares (none for litellm's own)."""
    provider = route.partition("/")[0]
    if provider not in MODEL_PROVIDERS:
        return frozenset()
    return frozenset(getattr(MODEL_PROVIDERS.get(provider), "params", ()))


def check_route(route: str, params: Mapping[str, Any]) -> None:
    """Raise ValueError if neither litellm nor a registered provider can serve ``route`` with ``params``.
    A registered provider's route is its own check's to judge: importing litellm (seconds) to look it
    up would only find what registering it puts there, and a warm run answered from the cache never
    needs litellm at all."""
    provider = route.partition("/")[0]
    if provider not in MODEL_PROVIDERS:
        lm = ensure_providers(route)
        try:
            lm.get_llm_provider(route)
        except Exception:
            raise ValueError(f"litellm has no provider {provider!r} (route {route!r})") from None
    check = getattr(MODEL_PROVIDERS.get(provider), "check", None) if provider in MODEL_PROVIDERS else None
    if check is not None:
        try:
            check(route, params)
        except ValueError as exc:
            raise ProviderCheckError(str(exc)) from None


@lru_cache(maxsize=64)
def takes_seed(route: str) -> bool:
    """Whether litellm sends OpenAI's `seed` on ``route`` (a provider without it would refuse the
    call). A registered provider reads whatever the request carries, so it always takes it."""
    if route.partition("/")[0] in MODEL_PROVIDERS:
        return True
    lm = ensure_providers(route)
    try:
        model, provider, *_ = lm.get_llm_provider(route)
        supported = lm.get_supported_openai_params(model=model, custom_llm_provider=provider)
    except Exception:  # litellm cannot say: sending it would fail every call the same way
        return False
    return supported is None or "seed" in supported


# litellm reads exactly OPENAI_API_KEY on these routes (every OpenAI-compatible server among them), and
# an absent one surfaces as a server error, retried and skipped as an outage. Other providers' keys
# have names litellm's own check does not know (TOGETHER_API_KEY, CO_API_KEY, HF_TOKEN, ...), and
# their absence is an authentication error on the first call, which stops the run in one line.
_CHECKED_KEY_PROVIDERS = frozenset({"openai", "text-completion-openai"})


def missing_key(route: str, *, api_base: str | None = None) -> tuple[list[str], bool]:
    """(the key variables litellm would look for on ``route`` and finds unset, whether that is certain).
    Certain only on the routes in _CHECKED_KEY_PROVIDERS; elsewhere a hint (the provider may read a
    name litellm's check does not know). Nothing for a registered provider, which holds its own keys."""
    if route.partition("/")[0] in MODEL_PROVIDERS:
        return [], False
    lm = ensure_providers(route)
    try:
        provider = lm.get_llm_provider(route)[1]
        found = lm.validate_environment(model=route, api_base=api_base)
    except Exception:  # litellm cannot say: the first call will
        return [], False
    if found.get("keys_in_environment"):
        return [], False
    return [str(k) for k in found.get("missing_keys") or []], provider in _CHECKED_KEY_PROVIDERS


class ProviderCheckError(ValueError):
    """A registered provider refused the model name or a parameter (its message says which)."""


@lru_cache(maxsize=1)
def litellm_module() -> ModuleType:
    """litellm, imported once with its local price map (no network fetch) and quiet logging; what
    a model provider registers its custom handler with.

    Raises:
        ImportError: litellm is not installed.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # Hydra sets the root logger to INFO; litellm would then log every call.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


async def drain_litellm_logging() -> None:
    """Let litellm finish the logging work of this event loop's calls. litellm hands it to a worker
    bound to the running loop, through a task it spawns once a reply is back; a loop that ends
    (``asyncio.run`` returns) with that work still queued makes the next loop carry it over with a
    warning, once per short-lived loop (an LLM mutator's single call). A no-op when litellm was
    never imported, or has no such worker."""
    import asyncio
    import importlib
    import sys

    if "litellm" not in sys.modules:
        return
    try:
        worker = importlib.import_module("litellm.litellm_core_utils.logging_worker").GLOBAL_LOGGING_WORKER
    except (ImportError, AttributeError):
        return
    for _ in range(5):  # the spawned task runs, then enqueues: a few turns of the loop
        await asyncio.sleep(0)
    await worker.flush()


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


def first_line(exc: BaseException) -> str:
    """The first line of what litellm (or a provider through it) raised, at most 300 characters: what a one-line message quotes."""
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else "(no message)"
