"""The litellm side of the ``sim`` provider: the CustomLLM handler, its responses and prices.

Thin I/O shell: read the request out of litellm's call, run ``service.run_request``, apply faults,
sleep the simulated latency, and answer with a ModelResponse carrying usage so that litellm's
own ``completion_cost`` prices it. Only registering the provider imports this module (and litellm).
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import litellm  # noqa: E402
from litellm import CustomLLM  # noqa: E402
from litellm.types.utils import ChatCompletionMessageToolCall, Function  # noqa: E402

from evoharness.compiler.sim.conversation import SimRequestError  # noqa: E402
from evoharness.compiler.sim.engine import SimRequest, SimResult  # noqa: E402
from evoharness.compiler.sim.faults import FaultKind  # noqa: E402
from evoharness.compiler.sim.gold import GoldSource, WorkloadGoldSource  # noqa: E402
from evoharness.compiler.sim.render import Rendered  # noqa: E402
from evoharness.compiler.sim.service import PROCESSING_HEADER, SimOutcome, run_request  # noqa: E402
from evoharness.compiler.sim.tiers import PROVIDER, TIERS  # noqa: E402


def _user(optional_params: Mapping[str, Any], litellm_params: Mapping[str, Any] | None,
          logging_obj: Any) -> str | None:
    # litellm keeps the OpenAI `user` field on the logging object for custom providers (1.110);
    # the other places are checked so a litellm upgrade that moves it does not break the sim.
    details = getattr(logging_obj, "model_call_details", None) or {}
    extra_body = optional_params.get("extra_body") or {}
    for candidate in (optional_params.get("user"), (litellm_params or {}).get("user"),
                      details.get("user"), getattr(logging_obj, "user", None),
                      extra_body.get("user") if isinstance(extra_body, Mapping) else None):
        if candidate:
            return str(candidate)
    return None


def build_model_response(result: SimResult, rendered: Rendered) -> litellm.ModelResponse:
    calls = [ChatCompletionMessageToolCall(id=c.id, type="function",
                                           function=Function(name=c.name, arguments=c.arguments))
             for c in rendered.tool_calls]
    message = litellm.Message(role="assistant", content=rendered.content, tool_calls=calls or None)
    return litellm.ModelResponse(
        id=f"chatcmpl-sim-{result.digest[:16]}",
        model=result.model_name,
        choices=[litellm.Choices(index=0, finish_reason=rendered.finish_reason, message=message)],
        usage=litellm.Usage(prompt_tokens=result.prompt_tokens,
                            completion_tokens=result.completion_tokens,
                            total_tokens=result.prompt_tokens + result.completion_tokens),
    )


def fault_exception(kind: FaultKind, model: str) -> Exception:
    if kind == "timeout":
        return litellm.Timeout(message=f"simulated timeout from {model}", model=model,
                               llm_provider=PROVIDER)
    if kind == "server_error":
        return litellm.InternalServerError(message=f"simulated 500 from {model}",
                                           llm_provider=PROVIDER, model=model)
    return litellm.RateLimitError(message=f"simulated 429 from {model}", llm_provider=PROVIDER,
                                  model=model)


class SimLLM(CustomLLM):
    def __init__(self, gold: GoldSource | None = None) -> None:
        super().__init__()
        self.gold: GoldSource = gold or WorkloadGoldSource()

    def _prepare(self, model: str, messages: list[Any], optional_params: Mapping[str, Any],
                 litellm_params: Mapping[str, Any] | None, logging_obj: Any) -> SimOutcome:
        request = SimRequest(model=model, messages=messages, tools=optional_params.get("tools"),
                             temperature=optional_params.get("temperature"),
                             user=_user(optional_params, litellm_params, logging_obj), seed=optional_params.get("seed"))
        try:
            return run_request(request, self.gold, optional_params.get("sim_faults"))
        except (SimRequestError, ValueError) as exc:
            # a 400: litellm callers treat it as a configuration error, never retried
            raise litellm.BadRequestError(message=str(exc), model=f"{PROVIDER}/{model}",
                                          llm_provider=PROVIDER) from exc

    @staticmethod
    def _answer(outcome: SimOutcome) -> litellm.ModelResponse:
        if outcome.fault in ("timeout", "server_error", "rate_limit"):
            raise fault_exception(outcome.fault, outcome.result.model_name)
        response = build_model_response(outcome.result, outcome.rendered)
        # the simulated latency, reported as a provider reports its own processing time (OpenAI's
        # header, which litellm keeps in the response's additional headers)
        response._hidden_params["additional_headers"] = {PROCESSING_HEADER: f"{outcome.delay_s * 1000:.3f}"}
        return response

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        outcome = self._prepare(model, messages, *_params(args, kwargs))
        time.sleep(outcome.delay_s)
        return self._answer(outcome)

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        outcome = self._prepare(model, messages, *_params(args, kwargs))
        await asyncio.sleep(outcome.delay_s)
        return self._answer(outcome)


def _params(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """optional_params, litellm_params, logging_obj from CustomLLM's long signature."""
    names = ("api_base", "custom_prompt_dict", "model_response", "print_verbose", "encoding",
             "api_key", "logging_obj", "optional_params", "acompletion", "litellm_params")
    bound = dict(zip(names, args)) | dict(kwargs)
    return bound.get("optional_params") or {}, bound.get("litellm_params"), bound.get("logging_obj")


def model_info(tier_name: str) -> dict[str, Any]:
    tier = TIERS[tier_name]
    return {
        "input_cost_per_token": tier.input_cost_per_token,
        "output_cost_per_token": tier.output_cost_per_token,
        "litellm_provider": PROVIDER, "mode": "chat",
        "max_tokens": 8192, "max_input_tokens": 128000, "max_output_tokens": 8192,
        "supports_function_calling": True, "supports_parallel_function_calling": False,
        "supports_tool_choice": True,
        "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
    }


def _register_http_routes() -> None:
    """Make ``openai/sim/<tier>`` (the HTTP endpoint) priced and sent the `user` field.

    litellm 1.110 forwards `user` on the openai route only for models in its OpenAI catalog and
    prices a response by (provider, model); listing our three names fixes both for these routes
    only. Other OpenAI-compatible servers still need extra_body={"user": ...}.
    """
    for name in TIERS:
        litellm.open_ai_chat_completion_models.add(f"{PROVIDER}/{name}")
    litellm.register_model({f"openai/{PROVIDER}/{name}": dict(model_info(name), litellm_provider="openai")
                            for name in TIERS})
