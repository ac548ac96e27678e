"""The sim routes through litellm itself: responses, usage, cost, latency, faults."""
from __future__ import annotations

import asyncio
import time

import pytest

from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.sim.engine import SimRequest, simulate
from evoharness.compiler.sim.faults import DEFAULT_TIME_SCALE, SimConfig, configure_sim, decide_fault, reset_sim
from evoharness.compiler.sim.provider import register_sim_provider
from evoharness.compiler.sim.tiers import TIERS
from tests.compiler.sim.sim_selfplay import openai_tools
from tests.compiler.sim.test_sim_fixtures import GOLD, SPECS, USER, converse, prompt, start

lm = litellm_module()
TOOLS = openai_tools(SPECS)


@pytest.fixture(autouse=True)
def sim_with_fake_gold():
    handler = register_sim_provider()
    previous = handler.gold
    handler.gold = GOLD
    reset_sim()
    configure_sim(None, time_scale=0.0)
    yield
    handler.gold = previous
    reset_sim()


def test_registration_is_idempotent():
    assert register_sim_provider() is register_sim_provider()
    assert sum(1 for e in lm.custom_provider_map if e["provider"] == "sim") == 1


def test_acompletion_returns_tool_calls_usage_and_cost():
    r = asyncio.run(lm.acompletion(model="sim/small", messages=start(), tools=TOOLS, temperature=0, user=USER))
    call = r.choices[0].message.tool_calls[0]
    assert isinstance(call, lm.types.utils.ChatCompletionMessageToolCall)
    assert (call.function.name, call.function.arguments) == ("ls", "{}")
    assert r.choices[0].finish_reason == "tool_calls" and r.model == "sim/small"
    assert r.usage.prompt_tokens > 100 and r.usage.completion_tokens > 0
    tier = TIERS["small"]
    expected = r.usage.prompt_tokens * tier.input_cost_per_token + r.usage.completion_tokens * tier.output_cost_per_token
    assert lm.completion_cost(completion_response=r) == pytest.approx(expected)


def test_sync_completion_equals_the_engine_for_a_multi_step_conversation():
    replies = asyncio.run(converse(lm, "sim/medium", 8))
    assert replies[-1][2] == "stop" and len(replies) >= 4
    r = lm.completion(model="sim/medium", messages=start(), tools=TOOLS, temperature=1.0, user=USER)
    direct = simulate(SimRequest("sim/medium", start(), TOOLS, 1.0, USER), GOLD)
    assert r.choices[0].message.tool_calls[0].function.arguments == direct.rendered.tool_calls[0].arguments
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (direct.prompt_tokens, direct.completion_tokens)


def test_prices_rise_with_tier():
    costs = [lm.completion_cost(completion_response=lm.completion(
        model=f"sim/{t}", messages=start(), tools=TOOLS, temperature=0, user=USER)) for t in TIERS]
    assert costs == sorted(costs) and costs[0] * 10 < costs[-1]


def test_latency_is_slept_and_differs_by_tier():
    configure_sim(None, time_scale=0.1)

    def wall(model: str) -> float:
        t0 = time.perf_counter()
        asyncio.run(lm.acompletion(model=model, messages=start(), tools=TOOLS, temperature=0, user=USER))
        return time.perf_counter() - t0

    wall("sim/small")  # the first call pays litellm's lazy set-up: not the model's latency
    # best of three: on a shared machine a single wall time can be inflated, never deflated below the sleep
    small, large = min(wall("sim/small") for _ in range(3)), min(wall("sim/large") for _ in range(3))
    assert small >= 0.1 * TIERS["small"].base_latency_s and large > 2 * small


def test_default_time_scale_fits_the_budget():
    # 2000 calls at concurrency 16 with ~40 completion tokens each: well under a minute of sleep,
    # and the large tier sleeps clearly longer than the small one
    def sleep(tier):
        return 2000 / 16 * DEFAULT_TIME_SCALE * (tier.base_latency_s + 40 * tier.per_token_latency_s)

    assert sleep(TIERS["large"]) < 30 and sleep(TIERS["large"]) > 3 * sleep(TIERS["small"])


@pytest.mark.parametrize(("knob", "exc"), [("timeout_rate", "Timeout"), ("server_error_rate", "InternalServerError"),
                                           ("rate_limit_rate", "RateLimitError")])
def test_faults_raise_litellms_own_exceptions_per_route(knob, exc):
    configure_sim("sim/small", **{knob: 1.0})
    with pytest.raises(getattr(lm, exc)):
        asyncio.run(lm.acompletion(model="sim/small", messages=start(), tools=TOOLS, user=USER))
    with pytest.raises(getattr(lm, exc)):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS, user=USER)
    lm.completion(model="sim/large", messages=start(), tools=TOOLS, user=USER)  # other routes unaffected


def test_malformed_fault_returns_invalid_arguments():
    configure_sim(None, time_scale=0.0, malformed_rate=1.0)
    r = lm.completion(model="sim/small", messages=start(), tools=TOOLS, temperature=0, user=USER)
    import json
    with pytest.raises(ValueError):
        json.loads(r.choices[0].message.tool_calls[0].function.arguments or "x")


def test_fault_decision_is_deterministic_per_attempt_and_retries_can_succeed():
    config = SimConfig(server_error_rate=0.5)
    outcomes = [decide_fault(config, "digest", a) for a in range(40)]
    assert outcomes == [decide_fault(config, "digest", a) for a in range(40)]
    assert None in outcomes and "server_error" in outcomes

    configure_sim("sim/small", server_error_rate=0.5)
    def attempt(n: int) -> str:
        try:
            lm.completion(model="sim/small", messages=start(), tools=TOOLS, temperature=0, user=f"{USER};attempt={n}")
            return "ok"
        except lm.InternalServerError:
            return "500"
    explicit = [attempt(n) for n in range(12)]
    assert explicit == [attempt(n) for n in range(12)] and {"ok", "500"} <= set(explicit)
    # without attempt=, retries of the identical request count up and eventually succeed
    results = []
    for _ in range(12):
        try:
            lm.completion(model="sim/small", messages=start(), tools=TOOLS, temperature=0, user=USER)
            results.append("ok")
            break
        except lm.InternalServerError:
            results.append("500")
    assert results[-1] == "ok"


def test_bad_requests_are_400s_that_name_the_fix():
    with pytest.raises(lm.BadRequestError, match="task_id=<workload>/<id>"):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS)
    with pytest.raises(lm.BadRequestError, match="cannot find task"):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS, user="task_id=fake/nope")
    with pytest.raises(lm.BadRequestError, match="unknown simulated model"):
        lm.completion(model="sim/huge", messages=start(), tools=TOOLS, user=USER)


def test_config_validation_names_the_bad_value():
    with pytest.raises(ValueError, match="timeout_rate=1.5"):
        SimConfig(timeout_rate=1.5)
    with pytest.raises(ValueError, match="sum to more than 1"):
        SimConfig(timeout_rate=0.6, rate_limit_rate=0.6)
    with pytest.raises(TypeError, match="unknown sim knobs"):
        configure_sim(None, timeout=0.1)


def test_per_request_sim_faults_override_the_route():
    with pytest.raises(lm.RateLimitError):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS, user=USER, sim_faults={"rate_limit_rate": 1.0})
    lm.completion(model="sim/small", messages=start(), tools=TOOLS, user=USER)
    with pytest.raises(lm.BadRequestError, match="unknown sim_faults knobs"):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS, user=USER, sim_faults={"nope": 1})


def test_mutator_requests_are_answered_by_the_rewriter():
    messages = [{"role": "system", "content": "You improve harnesses."},
                {"role": "user", "content": "<current>\nBe careful.\n</current>\n<evidence>\n- `mv.source`: wrong value\n</evidence>"}]
    r = lm.completion(model="sim/medium", messages=messages, temperature=0,
                      user="task_id=mutator/llm_prompt_rewriter", seed=1)
    text = r.choices[0].message.content
    assert text.startswith("<section>") and "`mv`" in text and "`source`" in text
    assert r.choices[0].finish_reason == "stop" and lm.completion_cost(completion_response=r) > 0
    with pytest.raises(lm.BadRequestError, match="no answer"):
        lm.completion(model="sim/medium", messages=[{"role": "user", "content": "hi"}],
                      user="task_id=mutator/unknown", seed=1)


def test_shared_draws_is_a_knob_per_request_and_per_route():
    """Two prompts that differ only in a sentence no cue reads: with shared draws they get the same
    trajectory, by default each gets its own (a real model's noise is not shared between prompts)."""
    def first_moves(sim_faults, role):
        moves = []
        for sample in range(12):
            user = USER.replace("sample=0", f"sample={sample}")
            msgs = [{"role": "system", "content": prompt(sections=(("Role", role),))}, start()[1]]
            r = lm.completion(model="sim/small", messages=msgs, tools=TOOLS, user=user, temperature=1.5,
                              **({"sim_faults": sim_faults} if sim_faults else {}))
            call = (r.choices[0].message.tool_calls or [None])[0]
            moves.append(call.function.arguments if call else r.choices[0].message.content)
        return moves

    a, b = "You manage files.", "You manage the user's files."
    assert first_moves({"shared_draws": True}, a) == first_moves({"shared_draws": True}, b)
    assert first_moves(None, a) != first_moves(None, b)
    assert first_moves(None, a) == first_moves(None, a)  # each harness stays reproducible
    configure_sim("sim/small", shared_draws=True)
    assert first_moves(None, a) == first_moves(None, b)
    with pytest.raises(lm.BadRequestError, match="shared_draws"):
        lm.completion(model="sim/small", messages=start(), tools=TOOLS, user=USER, sim_faults={"shared_draws": "yes"})
