"""The null model, as an evoharness plugin: routes ``null/<name>`` whose pass or fail ignores the harness.

An episode passes by a coin whose bias depends on the task only (``task_pass_rate``: spread over
[0.2, 0.8]), moved by the route's ``shift``. Each episode's coin is drawn from (task, seed, sample,
what the variant sends: system prompt, tools, temperature), so two variants get independent noise,
as two prompts do on a real model; a route with ``own_noise`` adds its name, so two such routes
draw independently too, as two models do. On a pass it replays the task's reference calls (in the
tool format the harness asked for), on a fail it answers without calling a tool.

Routes (name after ``null/``):

- ``coin``: the null itself (bench/null_claims.py), priced like sim_small;
- ``strong``: the same bias with its own coins, priced like sim_large (model config ``null_strong``);
- ``worse``: every task's bias 0.06 lower (so within [0.14, 0.74]: nothing clipped), with its own
  coins, priced like sim_small (model config ``null_worse``; bench/worse_claims.py).

Load it as a plugin, with bench/ importable in every process (a launcher's workers import the
plugins of their job's config; a provider registered only in the search's own process never
reaches the forkserver's workers), and the model configs of bench/null_conf as a config dir:
``PYTHONPATH=bench evoharness search --config-dir bench/null_conf plugins=[null_provider] model=null_strong
search.models=[null_worse] ...``. (A plugin's ``CONFIG_DIR``, or ``hydra.searchpath``, would serve
``model=`` but not ``search.models``: the search's preflight looks model names up in the package's
conf/ and a ``--config-dir`` only.)
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.compiler.runtime.llm import register_model_provider

CONF = Path(__file__).resolve().parent / "null_conf"  # model/null_strong.yaml, model/null_worse.yaml
ROUTE = "null/coin"
PRICE_IN, PRICE_OUT = 0.15e-6, 0.6e-6  # sim_small's, so cost criteria behave as on the main job
LARGE_IN, LARGE_OUT = 3.00e-6, 12.00e-6  # sim_large's
WORSE_SHIFT = -0.06


@dataclass(frozen=True)
class NullRoute:
    """One ``null/<name>`` route: every task's pass probability moved by ``shift``, at these prices."""

    shift: float = 0.0
    price_in: float = PRICE_IN
    price_out: float = PRICE_OUT
    own_noise: bool = False  # the route's name in its coins' key


NULL_ROUTES: dict[str, NullRoute] = {
    "coin": NullRoute(),
    "strong": NullRoute(price_in=LARGE_IN, price_out=LARGE_OUT, own_noise=True),
    "worse": NullRoute(shift=WORSE_SHIFT, own_noise=True),
}


def _u(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big") / 2.0**64


def task_pass_rate(task_id: str) -> float:
    """The ``coin`` route's pass probability on a task (another route's: plus its shift)."""
    return 0.2 + 0.6 * _u("null-p", task_id)


def _handler() -> Any:
    """The litellm custom handler serving every null route."""
    import litellm
    from litellm import CustomLLM
    from litellm.types.utils import ChatCompletionMessageToolCall, Function

    from evoharness.compiler.sim.conversation import parse_user, split_conversation
    from evoharness.compiler.sim.gold import WorkloadGoldSource
    from evoharness.compiler.sim.render import FENCE, bash_line

    gold = WorkloadGoldSource()

    def user_of(optional: Mapping[str, Any], logging_obj: Any) -> str | None:
        details = getattr(logging_obj, "model_call_details", None) or {}
        return optional.get("user") or details.get("user")

    def answer(model: str, messages: list[Any], optional: Mapping[str, Any], logging_obj: Any) -> Any:
        name = model.rpartition("/")[2]
        route = NULL_ROUTES[name]
        meta = parse_user(user_of(optional, logging_obj))
        task = gold.task(meta.task_id)
        conv = split_conversation(messages, [[str(m.get("content", "")) for m in t] for t in task.turns])
        tools = optional.get("tools")
        # what the variant sends: prompt, tools and temperature (a real model's noise differs for each)
        sent = [conv.system_prompt, tools, optional.get("temperature")]
        harness = hashlib.sha256(json.dumps(sent, sort_keys=True, default=str).encode()).hexdigest()
        # the request's seed differs per run seed, task and sample: each sample is a fresh coin
        key = ("null-coin", meta.task_id, optional.get("seed"), harness) + ((name,) if route.own_noise else ())
        passes = _u(*key) < task_pass_rate(meta.task_id) + route.shift
        calls = tuple(task.gold[conv.turn]) if passes and conv.turn < len(task.gold) else ()
        made = sum(len(e.results) for e in conv.current if e.kind == "tool_results")
        content, tool_calls = "Done.", None
        if made < len(calls):
            call = calls[made]
            if tools:
                tool_calls = [ChatCompletionMessageToolCall(id=f"call_{harness[:8]}_{made}", type="function",
                                                            function=Function(name=call.name, arguments=json.dumps(dict(call.arguments))))]
                content = ""
            else:
                content = f"{FENCE}\n{bash_line(call.name, call.arguments)}\n```"
        message = litellm.Message(role="assistant", content=content, tool_calls=tool_calls)
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4 + 50
        return litellm.ModelResponse(
            model=f"null/{name}", choices=[litellm.Choices(index=0, finish_reason="tool_calls" if tool_calls else "stop",
                                                           message=message)],
            usage=litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=20, total_tokens=prompt_tokens + 20))

    class NullLLM(CustomLLM):
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return answer(model, messages, kwargs.get("optional_params") or {}, kwargs.get("logging_obj"))

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            await asyncio.sleep(0)
            return answer(model, messages, kwargs.get("optional_params") or {}, kwargs.get("logging_obj"))

    return NullLLM()


def _check(route: str, params: Mapping[str, Any]) -> None:
    if route.partition("/")[2] not in NULL_ROUTES:
        raise ValueError(f"the null provider has no route {route!r}; use one of {[f'null/{n}' for n in NULL_ROUTES]}")


def _cache_tag(route: str) -> str:
    """This file's source: a changed null model is never answered from an older one's cache entries."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


@register_model_provider("null", check=_check, cache_tag=_cache_tag)
def _null() -> None:
    from evoharness.compiler.runtime.llm import litellm_module

    litellm = litellm_module()
    # idempotent, and never a moment without the entry: this runs before every model call
    if any(e.get("provider") == "null" for e in litellm.custom_provider_map):
        return
    quiet = logging.getLogger("LiteLLM")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # register_model warns that a custom route has no cache-token prices
    try:
        litellm.register_model({f"null/{name}": {"input_cost_per_token": r.price_in, "output_cost_per_token": r.price_out,
                                                 "litellm_provider": "null", "mode": "chat", "supports_function_calling": True}
                                for name, r in NULL_ROUTES.items()})
    finally:
        quiet.setLevel(level)
    litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": "null", "custom_handler": _handler()}]
