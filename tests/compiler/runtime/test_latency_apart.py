"""Latency is the successful attempt's time; failed attempts and backoff are counted apart
(attempts, infra seconds), so an outage never moves a variant's latency."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from evoharness.compiler.route import ModelParams, RouteSettings
from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.runtime.models import InfraError, ModelClient


def fake_provider(fail_first: int, *, fail_s: float, ok_s: float) -> Any:
    lm = litellm_module()
    calls = {"n": 0}

    async def acompletion(**_: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= fail_first:
            await asyncio.sleep(fail_s)
            raise lm.InternalServerError("boom", llm_provider="openai", model="x")
        await asyncio.sleep(ok_s)
        message = SimpleNamespace(content="done", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")],
                               usage=SimpleNamespace(prompt_tokens=10, completion_tokens=2))

    return acompletion


def client(retries: int) -> ModelClient:
    return ModelClient(ModelParams(route="openai/fake"), RouteSettings(retries=retries, backoff_s=0.1, input_cost_per_token=1e-6,
                                                                       output_cost_per_token=1e-6))


def test_failed_attempts_and_backoff_are_not_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", fake_provider(2, fail_s=0.3, ok_s=0.05))
    reply = asyncio.run(client(retries=3).complete([{"role": "user", "content": "hi"}], tools=[], user="u"))
    assert reply.attempts == 3
    assert 0.04 <= reply.latency_s < 0.25  # the successful attempt only, not the 0.6 s of failures
    assert reply.infra_s >= 0.3 * 2 + 0.1 + 0.2 - 0.02  # two failed attempts and two backoffs


def test_a_call_that_outlives_its_retries_carries_its_lost_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", fake_provider(5, fail_s=0.05, ok_s=0.05))
    with pytest.raises(InfraError) as err:
        asyncio.run(client(retries=1).complete([{"role": "user", "content": "hi"}], tools=[], user="u"))
    assert err.value.attempts == 2 and err.value.infra_s >= 0.05 * 2 + 0.1 - 0.02


def test_a_clean_call_has_no_infra_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", fake_provider(0, fail_s=0.0, ok_s=0.02))
    reply = asyncio.run(client(retries=3).complete([{"role": "user", "content": "hi"}], tools=[], user="u"))
    assert reply.attempts == 1 and reply.infra_s == 0.0 and reply.latency_s >= 0.015
