"""A scripted litellm provider (`script/<name>`): the mock model for runtime tests.

A script is a function of the request messages; it returns what the model says, or raises the
exception litellm would raise. Registered through litellm's own custom-provider map, so the
harness reaches it exactly as it reaches any route.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from evoharness.compiler.runtime.llm import litellm_module

Script = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]
SCRIPTS: dict[str, Script] = {}
# scripts that also read the request's `user` field (task id, sample, seed), as a real route receives it
UserScript = Callable[[list[dict[str, Any]], list[dict[str, Any]], str], dict[str, Any]]
USER_SCRIPTS: dict[str, UserScript] = {}
CALLS: dict[str, int] = {}


def _response(model: str, out: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
    lm = litellm_module()
    from litellm.types.utils import (
        ChatCompletionMessageToolCall,
        Choices,
        Function,
        Message,
        ModelResponse,
        Usage,
    )

    tool_calls = [
        ChatCompletionMessageToolCall(id=f"call_{i}", type="function", function=Function(name=c["name"], arguments=c["arguments"]))
        for i, c in enumerate(out.get("tool_calls", []))
    ] or None
    message = Message(role="assistant", content=out.get("content"), tool_calls=tool_calls)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    completion_tokens = len(str(out.get("content") or "").split()) + 5 * len(out.get("tool_calls", []))
    del lm
    return ModelResponse(
        model=model,
        choices=[Choices(index=0, message=message, finish_reason="tool_calls" if tool_calls else "stop")],
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens),
    )


def register_scripted_provider() -> None:
    lm = litellm_module()
    from litellm.llms.custom_llm import CustomLLM

    class Scripted(CustomLLM):
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            name = model.split("/", 1)[-1]
            CALLS[name] = CALLS.get(name, 0) + 1
            optional = kwargs.get("optional_params") or {}
            tools = optional.get("tools") or []
            time.sleep(0.001)
            if name in USER_SCRIPTS:
                # litellm 1.110 keeps `user` on the logging object for custom providers
                details = getattr(kwargs.get("logging_obj"), "model_call_details", None) or {}
                user = optional.get("user") or details.get("user") or ""
                return _response(model, USER_SCRIPTS[name](messages, tools, str(user)), messages)
            return _response(model, SCRIPTS[name](messages, tools), messages)

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return self.completion(model, messages, *args, **kwargs)

    if not any(p.get("provider") == "script" for p in lm.custom_provider_map):
        lm.custom_provider_map = [*lm.custom_provider_map, {"provider": "script", "custom_handler": Scripted()}]
