"""Model providers: registered by name, sim a lazy built-in, ensure_providers before model calls."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.runtime import llm
from evoharness.compiler.runtime.llm import ensure_providers, litellm_module, register_model_provider
from evoharness.compiler.sim.faults import configure_sim, reset_sim
from evoharness.compiler.sim.handler import SimLLM
from evoharness.compiler.sim.provider import register_sim_provider
from tests.compiler.sim.sim_selfplay import openai_tools
from tests.compiler.sim.test_sim_fixtures import GOLD, SPECS, USER, start

lm = litellm_module()
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fresh provider registry, its built-in ``sim`` faked, so registrations do not outlive the test."""
    made: list[str] = []
    monkeypatch.setattr(llm, "MODEL_PROVIDERS", NamedRegistry(
        "model provider", builtins=dict(llm.MODEL_PROVIDERS.builtins), decorator="@register_model_provider"))
    register_model_provider("sim")(lambda: made.append("sim"))
    register_model_provider("mine")(lambda: made.append("mine"))
    return made


@pytest.mark.parametrize("route, registered", [
    (None, ["mine", "sim"]),  # what the model client asks for: every provider
    ("sim/small", ["sim"]),
    ("mine/any-model", ["mine"]),
    ("openai/sim/small", []),  # the HTTP sim endpoint is litellm's own openai provider
    ("anthropic/claude", []),
    ("gpt-4o", []),
])
def test_ensure_providers_registers_every_provider_or_the_one_the_route_names(
        calls: list[str], route: str | None, registered: list[str]) -> None:
    assert ensure_providers(route) is lm
    assert calls == registered


def test_sim_is_a_builtin_import_path_not_imported_by_listing_providers() -> None:
    assert llm.MODEL_PROVIDERS.builtins["sim"] == "evoharness.compiler.sim.provider:register_sim_provider"
    assert llm.MODEL_PROVIDERS.get("sim") is register_sim_provider
    probe = ("import sys; from evoharness.compiler.runtime.llm import MODEL_PROVIDERS; names = MODEL_PROVIDERS.names(); "
             "print(names, 'litellm' in sys.modules, 'evoharness.compiler.sim.provider' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['sim']", "False", "False"]


@pytest.fixture
def without_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """litellm as if the sim provider had never been registered (restored afterwards)."""
    monkeypatch.setattr(lm, "custom_provider_map", [e for e in lm.custom_provider_map if e.get("provider") != "sim"])
    reset_sim()
    configure_sim(None, time_scale=0.0)
    yield
    reset_sim()


@pytest.mark.parametrize("route", [None, "sim/small"])
def test_ensure_providers_registers_sim_and_a_sim_route_completes(without_sim: None, route: str | None) -> None:
    assert not [e for e in lm.custom_provider_map if e.get("provider") == "sim"]
    ensure_providers(route)
    ensure_providers(route)  # idempotent: model clients call it before every request
    [entry] = [e for e in lm.custom_provider_map if e.get("provider") == "sim"]
    assert isinstance(entry["custom_handler"], SimLLM)
    register_sim_provider(gold=GOLD)
    r = asyncio.run(lm.acompletion(model="sim/small", messages=start(), tools=openai_tools(SPECS), temperature=0, user=USER))
    assert r.model == "sim/small" and r.choices[0].message.tool_calls[0].function.name == "ls"
    assert r.usage.prompt_tokens > 100 and lm.completion_cost(completion_response=r) > 0


def test_a_user_provider_added_with_the_decorator_serves_its_routes(calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm.llms.custom_llm import CustomLLM

    class Echo(CustomLLM):
        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return lm.ModelResponse(model=model, choices=[lm.Choices(index=0, finish_reason="stop", message=lm.Message(
                role="assistant", content=f"{model} heard: {messages[-1]['content']}"))])

    monkeypatch.setattr(lm, "custom_provider_map", list(lm.custom_provider_map))

    @register_model_provider("echo")
    def register_echo() -> None:
        calls.append("echo")
        if not any(e.get("provider") == "echo" for e in lm.custom_provider_map):
            lm.custom_provider_map = [*lm.custom_provider_map, {"provider": "echo", "custom_handler": Echo()}]

    ensure_providers("echo/parrot")
    assert calls == ["echo"]
    r = asyncio.run(lm.acompletion(model="echo/parrot", messages=[{"role": "user", "content": "hi"}]))
    assert r.choices[0].message.content == "parrot heard: hi"


def test_a_providers_cache_tag_keeps_a_changed_mode_out_of_old_cache_entries(tmp_path: Path) -> None:
    """The sim's draw mode is configured outside the request; its cache tag is part of the key, so
    switching to shared draws is a cache miss (the old answers were drawn the other way), and
    switching back finds the first entry again."""
    from evoharness.compiler.route import ModelParams, RouteSettings
    from evoharness.compiler.runtime.cache import ResponseCache
    from evoharness.compiler.runtime.models import ModelClient

    handler = register_sim_provider()
    previous = handler.gold
    handler.gold = GOLD
    reset_sim()
    configure_sim(None, time_scale=0.0)
    try:
        def ask() -> bool:
            client = ModelClient(ModelParams(route="sim/small"), RouteSettings(retries=0, send_episode_id=True),
                                 cache=ResponseCache(tmp_path))

            async def once() -> bool:
                async with client:  # the cache is written by a thread of its own: leaving the client waits for it
                    return (await client.complete(start(), tools=openai_tools(SPECS), user=USER)).cached
            return asyncio.run(once())

        assert ask() is False and ask() is True
        configure_sim("sim/small", shared_draws=True)
        assert llm.provider_cache_tag("sim/small") != llm.provider_cache_tag("sim/medium")
        assert ask() is False and ask() is True
        configure_sim("sim/small", shared_draws=False)
        assert ask() is True
        assert llm.provider_cache_tag("openai/sim/small") is None  # litellm's own provider: nothing to add
    finally:
        handler.gold = previous
        reset_sim()


def test_a_registered_provider_declares_its_cache_tag(calls: list[str]) -> None:
    register_model_provider("tagged", cache_tag=lambda route: f"v7:{route}")(lambda: None)
    assert llm.provider_cache_tag("tagged/m") == "v7:tagged/m" and llm.provider_cache_tag("mine/m") is None
