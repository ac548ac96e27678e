"""What a call's prompt cost: its cost less the completion at the route's output price, so a
provider's prompt discounts stay on the input side; unknown when the cost or the price is, and a
stored share that is not a number within its call's cost is unknown too."""
from __future__ import annotations

import math

import pytest

from evoharness.compiler.route import ModelParams, RouteSettings
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.reply import reply_from_record


def client(route: str = "openai/whatever", **settings: object) -> ModelClient:
    return ModelClient(ModelParams(route=route), RouteSettings(**settings))  # type: ignore[arg-type]


def test_the_prompt_pays_what_the_completion_does_not() -> None:
    priced = client(input_cost_per_token=1e-6, output_cost_per_token=4e-6)
    assert priced.input_cost(100, 0.0054) == pytest.approx(0.0054 - 100 * 4e-6)
    # a cached-prompt discount lowers the total: the output keeps its price, the prompt takes the discount
    assert priced.input_cost(100, 0.0030) == pytest.approx(0.0030 - 0.0004)
    assert priced.input_cost(100, 0.0001) == 0.0  # never below 0, nor above the total
    assert priced.input_cost(0, 0.002) == 0.002
    assert priced.input_cost(100, None) is None and priced.input_cost(100, 0.0) == 0.0


def test_free_unpriced_and_litellm_priced_routes() -> None:
    assert client(free=True, route="openai/no-such-model-here").input_cost(10, 0.0) == 0.0
    assert client(route="openai/no-such-model-here").input_cost(10, 0.001) is None  # no price to split by
    sim = client(route="sim/large")  # the simulator's tiers are in litellm's map: $12 per million output tokens
    assert sim.input_cost(1000, 0.05) == pytest.approx(0.05 - 1000 * 12e-6)


@pytest.mark.parametrize("share", [float("nan"), -1.0, 0.5, True, "0.001", 10**400, None])
def test_a_stored_share_outside_its_calls_cost_is_unknown(share: object) -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 2,
           "latency_s": 0.1, "cost_usd": 0.002, "input_cost_usd": share}
    assert reply_from_record(rec, cached=True).input_cost_usd is None


def test_a_stored_share_within_its_calls_cost_is_read() -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 2,
           "latency_s": 0.1, "cost_usd": 0.002, "input_cost_usd": 0.0015}
    assert reply_from_record(rec, cached=True).input_cost_usd == 0.0015
    assert reply_from_record({**rec, "cost_usd": math.inf}, cached=True).input_cost_usd is None


@pytest.mark.parametrize(("share", "known"), [(0.001, True), (float("nan"), False), (-1.0, False), ("x", False), (True, False),
                                              (0.01, False)])
def test_an_episodes_prompt_cost_is_unknown_when_a_stored_call_share_is_not_a_share(share: object, known: bool) -> None:
    from evoharness.compiler.runtime.trajectory import ModelCallRecord, Trajectory
    from evoharness.search.evaluation.episode import EpisodeResult

    calls = [ModelCallRecord(turn=0, prompt_tokens=10, completion_tokens=2, cost_usd=0.002, latency_s=0.1, finish_reason="stop",
                             input_cost_usd=share),  # type: ignore[arg-type]
             ModelCallRecord(turn=0, prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=0.1, finish_reason="unparseable"),
             ModelCallRecord(turn=0, prompt_tokens=50, completion_tokens=5, cost_usd=0.5, latency_s=0.1, finish_reason="stop",
                             escalated=True)]
    episode = EpisodeResult.from_episode(Trajectory("t", 0, 0, "v", "completed", model_calls=calls), None)
    assert episode.input_cost_usd == (0.001 if known else None)
