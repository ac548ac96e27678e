"""The per-call path: latency the provider reports is preferred to the stopwatch (and recorded as
such, and replayed from the cache as it was), the cache key changes with the route's revision and
the simulator's source, an unwritable cache is a warning and not a lost evaluation, and the cost
comes from litellm's own pricing of the reply."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evoharness.compiler.route import ModelParams, RouteSettings
from evoharness.compiler.runtime.cache import ResponseCache
from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.reply import provider_latency

MESSAGES = [{"role": "user", "content": "hi"}]


def reply(*, headers: dict[str, str] | None = None, cost: float | None = None, sleep_s: float = 0.02) -> Any:
    async def acompletion(**_: Any) -> Any:
        await asyncio.sleep(sleep_s)
        hidden: dict[str, Any] = {}
        if headers is not None:
            hidden["additional_headers"] = headers
        if cost is not None:
            hidden["response_cost"] = cost
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="done", tool_calls=None), finish_reason="stop")],
                               usage=SimpleNamespace(prompt_tokens=10, completion_tokens=2), _hidden_params=hidden)
    return acompletion


def client(cache: ResponseCache | None = None, **route: Any) -> ModelClient:
    return ModelClient(ModelParams(route="openai/fake"), RouteSettings(retries=0, **route), cache=cache)


@pytest.mark.parametrize("headers, expected", [
    ({"llm_provider-openai-processing-ms": "1234.5"}, 1.2345),  # litellm's prefix for a provider's header
    ({"openai-processing-ms": "80"}, 0.08),
    ({"openai-processing-ms": "-5"}, None), ({"openai-processing-ms": "nan"}, None), ({"openai-processing-ms": "soon"}, None),
    ({"openai-processing-ms": "1e3"}, None), ({"openai-processing-ms": "1_000"}, None), ({"openai-processing-ms": "٣٠٠"}, None),
    ({"openai-processing-ms": True}, None), ({"openai-processing-ms": b"50"}, None),
    ({"openai-processing-ms": "2500"}, None),  # more than the round trip it is part of
    ({}, None), ("not a mapping", None),
])
def test_provider_latency_reads_the_processing_header_or_nothing(headers: Any, expected: float | None) -> None:
    got = provider_latency(SimpleNamespace(_hidden_params={"additional_headers": headers}), measured=2.0)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_reported_latency_wins_over_the_stopwatch_and_replays_from_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", reply(headers={"llm_provider-openai-processing-ms": "7.5"}, sleep_s=0.02))
    c = client(ResponseCache(tmp_path), input_cost_per_token=1e-6, output_cost_per_token=1e-6)
    first = asyncio.run(c.complete(MESSAGES, tools=[], user="u"))
    assert first.latency_s == pytest.approx(0.0075) and first.latency_source == "provider" and not first.cached
    again = asyncio.run(c.complete(MESSAGES, tools=[], user="u"))
    assert again.cached and again.latency_s == pytest.approx(0.0075) and again.latency_source == "provider"


def test_without_a_header_the_stopwatch_is_used_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", reply(sleep_s=0.03))
    got = asyncio.run(client(input_cost_per_token=1e-6, output_cost_per_token=1e-6).complete(MESSAGES, tools=[], user="u"))
    assert got.latency_source == "client" and 0.025 <= got.latency_s < 0.5


def test_the_cost_litellm_put_on_the_reply_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", reply(cost=0.0123))
    assert asyncio.run(client().complete(MESSAGES, tools=[], user="u")).cost_usd == pytest.approx(0.0123)


def test_a_new_route_revision_is_a_cache_miss(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", reply(cost=0.001))
    cache = ResponseCache(tmp_path)

    def cached(revision: str | None) -> bool:
        async def once() -> bool:
            c = client(cache, revision=revision)
            got = await c.complete(MESSAGES, tools=[], user="u")
            await c.flush()  # the next client reads the entry from the folder
            return got.cached
        return asyncio.run(once())

    assert cached(None) is False and cached(None) is True
    assert cached("2026-11") is False and cached("2026-11") is True and cached(None) is True


def test_the_simulators_cache_tag_carries_a_hash_of_its_source() -> None:
    from evoharness.compiler.sim import provider

    before = provider.sim_cache_tag("sim/small")
    provider.source_hash.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(provider.Path, "read_bytes", lambda self: b"an edited simulator " + self.name.encode())
            assert provider.sim_cache_tag("sim/small") != before
    finally:
        provider.source_hash.cache_clear()
    assert provider.sim_cache_tag("sim/small") == before


def test_an_unwritable_cache_is_one_warning_and_the_calls_go_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(litellm_module(), "acompletion", reply(cost=0.001))
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be\n", encoding="utf-8")
    c = client(ResponseCache(blocker))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert asyncio.run(c.complete(MESSAGES, tools=[], user="u")).content == "done"
            asyncio.run(c.flush())  # the write (and its warning) happens on the cache's thread
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "cannot be written" in warned[0] and str(blocker) in warned[0], warned


def test_the_simulator_reports_its_latency_as_a_provider_would() -> None:
    from evoharness.compiler.sim import configure_sim, reset_sim
    from evoharness.compiler.sim.provider import register_sim_provider
    from tests.compiler.sim.sim_selfplay import openai_tools
    from tests.compiler.sim.test_sim_fixtures import GOLD, SPECS, USER, start

    handler = register_sim_provider()
    previous, handler.gold = handler.gold, GOLD
    reset_sim()
    configure_sim(None, time_scale=0.01)
    try:
        c = ModelClient(ModelParams(route="sim/small"), RouteSettings(retries=0, send_episode_id=True))
        first, second = (asyncio.run(c.complete(start(), tools=openai_tools(SPECS), user=USER)) for _ in range(2))
    finally:
        handler.gold = previous
        reset_sim()
    assert first.latency_source == "provider" and first.latency_s > 0
    assert first.latency_s == second.latency_s  # the same request, the same reported time, whatever the machine did


def test_a_reply_asked_again_before_its_entry_is_written_is_not_paid_twice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The cache is written by a thread of its own; until an entry lands, the client answers the
    same request from the reply it handed over, and once flushed the entry is on disk."""
    import threading

    calls: list[int] = []
    inner = reply(cost=0.002)

    async def counted(**kwargs: Any) -> Any:
        calls.append(1)
        return await inner(**kwargs)

    monkeypatch.setattr(litellm_module(), "acompletion", counted)
    folder, release = ResponseCache(tmp_path), threading.Event()

    class Slow:
        remote = False

        def get(self, key: str) -> Any:
            return folder.get(key)

        def put(self, key: str, value: Any) -> None:
            release.wait(timeout=30)  # the disk is slow: nothing lands until the test says so
            folder.put(key, value)

    c = client(Slow())

    async def twice() -> tuple[Any, Any]:
        first = await c.complete(MESSAGES, tools=[], user="u")
        return first, await c.complete(MESSAGES, tools=[], user="u")

    first, again = asyncio.run(twice())
    assert calls == [1] and not first.cached and again.cached and again.cost_usd == first.cost_usd
    assert not list(tmp_path.rglob("*.json"))  # neither was written yet
    release.set()
    asyncio.run(c.flush())
    assert len(list(tmp_path.rglob("*.json"))) == 1 and client(folder)._writes is not None
    assert asyncio.run(client(folder).complete(MESSAGES, tools=[], user="u")).cached  # a new client reads it from disk


def test_the_backoff_stops_doubling_at_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten retries from a 100 s backoff would wait 28 hours doubling; capped, each wait is at most MAX_BACKOFF_S."""
    from evoharness.compiler.runtime import models
    from evoharness.compiler.runtime.models import MAX_BACKOFF_S, InfraError

    async def outage(**_: Any) -> Any:
        raise litellm_module().InternalServerError("down", llm_provider="openai", model="fake")

    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(litellm_module(), "acompletion", outage)
    monkeypatch.setattr(models.asyncio, "sleep", sleep)
    c = ModelClient(ModelParams(route="openai/fake"), RouteSettings(retries=10, backoff_s=100.0))
    with pytest.raises(InfraError, match="after 11 attempts"):
        asyncio.run(c.complete(MESSAGES, tools=[], user="u"))
    assert waits[:2] == [100.0, 200.0] and max(waits) == MAX_BACKOFF_S and len(waits) == 10
