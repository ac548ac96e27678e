"""What ``model.extra`` may carry: generation parameters, and nothing that decides where a request
goes, whose key it carries, or whether a model is called at all.

``model.extra`` is passed to litellm with the request, and litellm reads its connection settings
from the same keyword arguments (``api_base``, ``base_url``, ``api_key``, ``extra_headers``,
``mock_response``, callbacks, ...). A registry snapshot is data a search wrote, or anyone who could
write the registry folder; if its ``model.extra`` were passed on verbatim, it could send the user's
key to any host (``api_base``), or answer every call itself (``mock_response``). So the field is an
allow-list, checked where every variant is compiled (config, override, snapshot) and again where a
request is built. Endpoint and key have their own first-class settings, ``model.api_base`` and
``model.api_key_env``, which a released snapshot may not change (compiler/release/merge.py).

A registered model provider (evoharness.compiler.runtime.llm.register_model_provider) may accept parameters of
its own; they are named ``<provider>_<name>`` for the route's own provider, so none can collide with a
litellm keyword, and the provider's check judges them before the run.
"""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from evoharness.compiler.errors import ConfigError

# OpenAI-style sampling and output-shape parameters litellm maps onto each provider. Settings with
# a first-class key of their own (temperature, max_tokens, the route, the timeout) are not here:
# one value per setting, and the hash and the records read the first-class one.
GENERATION_PARAMS = frozenset({
    "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "stop",
    "logit_bias", "logprobs", "top_logprobs", "response_format", "tool_choice", "parallel_tool_calls",
    "reasoning_effort", "thinking",
})

# Named apart only to say why they are refused: each redirects a request, carries a credential,
# replaces the model or the harness's own fields, or changes how litellm calls and retries.
_CONNECTION = re.compile(
    r"(api_base|base_url|api_version|api_key.*|.*_key|.*token.*|.*secret.*|.*password.*|.*credential.*|.*headers?|"
    r"custom_llm_provider|organization|project|deployment_id|aws_.*|azure_.*|vertex_.*|watsonx_.*|region_name|"
    r"mock_.*|.*callback.*|.*hook.*|metadata|proxy.*|client|litellm_.*|stream.*|n|model|messages|tools|functions|"
    r"function_call|user|seed|timeout|num_retries|max_retries|fallbacks|temperature|max_tokens|extra_body|drop_params|"
    r"additional_drop_params|allowed_openai_params|cache|caching|no-log|web_search_options|service_tier)",
    re.IGNORECASE,
)

# `seed` is the harness's: every request carries one per run seed, task and sample, so that samples
# are separate calls (one fixed seed would make every sample the same request, replayed from the cache)
_FIRST_CLASS = {"seed": "the run's seed (seed=N; each sample's request seed is derived from it)",
                "temperature": "model.temperature", "max_tokens": "model.max_tokens", "max_completion_tokens": "model.max_tokens",
                "timeout": "model.timeout_s",
                "num_retries": "model.retries", "max_retries": "model.retries", "api_base": "model.api_base",
                "base_url": "model.api_base", "api_key": "model.api_key_env", "model": "model.route"}


def check_extra(path: str, route: str, extra: Mapping[str, Any], *, provider_params: Collection[str] | None = None) -> None:
    """Raise ConfigError for the first key of ``extra`` that is not a generation parameter.

    ``provider_params``: the parameters the route's registered provider declares (None: not known
    here, so any ``<provider>_<name>`` key passes for its provider's own check to judge)."""
    if not isinstance(extra, Mapping):
        raise ConfigError(path, f"{extra!r} is not a mapping", "give model.extra as {param: value, ...} or leave it empty")
    provider = str(route).partition("/")[0]
    for key in extra:
        name = str(key)
        if name in GENERATION_PARAMS:
            continue
        own = bool(provider) and name.startswith(f"{provider}_") and len(name) > len(provider) + 1
        if own and (provider_params is None or name in provider_params) and not _CONNECTION.fullmatch(name.partition("_")[2]):
            continue
        if name in _FIRST_CLASS:
            raise ConfigError(f"{path}.{name}", "has a setting of its own, which model.extra may not replace",
                              f"set {_FIRST_CLASS[name]} instead (model.extra holds generation parameters only)")
        if _CONNECTION.fullmatch(name):
            raise ConfigError(f"{path}.{name}", "decides where a request goes, whose key it carries or whether a model "
                              "is called; model.extra holds generation parameters only",
                              "set the endpoint with model.api_base and the key's variable with model.api_key_env in your "
                              "own config (a promoted snapshot cannot change either)")
        if own:
            raise ConfigError(f"{path}.{name}", f"the {provider!r} provider declares no parameter {name!r}",
                              f"use one of {sorted(provider_params or ())}, or a generation parameter: {sorted(GENERATION_PARAMS)}")
        raise ConfigError(f"{path}.{name}", "is not a generation parameter evoharness passes to the model",
                          f"use one of {sorted(GENERATION_PARAMS)}, or a parameter of the route's own registered provider "
                          f"named {provider}_<name>")
