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
    assert priced.billing.input_cost(1000, 100, 0.0054) == pytest.approx(0.0054 - 100 * 4e-6)
    # a cached-prompt discount lowers the total: the output keeps its price, the prompt takes the discount
    assert priced.billing.input_cost(1000, 100, 0.0030) == pytest.approx(0.0030 - 0.0004)
    assert priced.billing.input_cost(1000, 100, 0.0001) == 0.0  # never below 0, nor above the total
    assert priced.billing.input_cost(1000, 0, 0.002) == 0.002
    assert priced.billing.input_cost(1000, 100, None) is None and priced.billing.input_cost(1000, 100, 0.0) == 0.0


def test_free_unpriced_and_litellm_priced_routes() -> None:
    assert client(free=True, route="openai/no-such-model-here").billing.input_cost(1000, 10, 0.0) == 0.0
    assert client(route="openai/no-such-model-here").billing.input_cost(1000, 10, 0.001) is None  # no price to split by
    sim = client(route="sim/large")  # the simulator's tiers are in litellm's map: $12 per million output tokens
    assert sim.billing.input_cost(1000, 1000, 0.05) == pytest.approx(0.05 - 1000 * 12e-6)


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


@pytest.mark.parametrize("total", [math.inf, -math.inf, math.nan, -0.01])
def test_a_cost_that_is_not_a_price_has_no_prompt_share(total: float) -> None:
    assert client(input_cost_per_token=1e-6, output_cost_per_token=4e-6).billing.input_cost(1000, 10, total) is None


def _mapped(name: str, **prices: float) -> str:
    """A route litellm's price map knows, with these prices (registered as a provider's own models are)."""
    from evoharness.compiler.runtime.llm import ensure_providers

    ensure_providers().register_model({name: {"litellm_provider": "openai", "mode": "chat", **prices}})
    return name


def test_output_billed_by_tier_or_reasoning_tokens_leaves_the_prompts_share_unknown() -> None:
    flat = client(route=_mapped("evoharness-test/flat", input_cost_per_token=1e-6, output_cost_per_token=4e-6))
    assert flat.billing.input_cost(1000, 100, 0.0054) == pytest.approx(0.0054 - 100 * 4e-6)
    # a flat output rate would move the tier's or the reasoning tokens' surcharge onto the prompt
    tiered = client(route=_mapped("evoharness-test/tiered", input_cost_per_token=1e-6, output_cost_per_token=4e-6,
                                  output_cost_per_token_above_200k_tokens=6e-6, output_cost_per_token_batches=2e-6))
    assert tiered.billing.input_cost(199_999, 100, 0.2004) == pytest.approx(0.2004 - 100 * 4e-6)  # below the tier: one rate
    assert tiered.billing.input_cost(200_000, 100, 0.2004) is None  # litellm's tier may start at its threshold
    assert tiered.billing.input_cost(250_000, 100, 0.2506) is None  # above it, the output's rate is another
    reasoning = _mapped("evoharness-test/reasoning", input_cost_per_token=1e-6, output_cost_per_token=4e-6,
                        output_cost_per_reasoning_token=9e-6)
    assert client(route=reasoning).billing.input_cost(1000, 100, 0.0054) is None
    # the route's own price is one rate per token, whatever litellm's map says of the model
    assert client(route=reasoning, input_cost_per_token=1e-6, output_cost_per_token=4e-6).billing.input_cost(1000, 100, 0.0054) \
        is not None


def test_a_model_litellm_maps_without_prices_is_unpriced_not_free() -> None:
    from evoharness.compiler.runtime.prices import route_price

    # litellm answers such a model with zero prices; a search must not count its calls at $0
    assert route_price(_mapped("evoharness-test/no-prices", max_input_tokens=1000)) is None
    assert route_price("evoharness-test/no-prices", free=True) is not None  # unless the config says it is free
    assert route_price("evoharness-test/flat") is not None


def test_cached_prompt_tokens_are_read_from_the_usage_and_a_stored_count_is_checked() -> None:
    from types import SimpleNamespace

    from evoharness.compiler.runtime.cache_entry import is_reply
    from evoharness.compiler.runtime.reply import provider_cached_tokens

    assert provider_cached_tokens(SimpleNamespace(prompt_tokens_details=SimpleNamespace(cached_tokens=700))) == 700
    assert provider_cached_tokens(SimpleNamespace(prompt_tokens_details=None, cache_read_input_tokens=300)) == 300
    assert provider_cached_tokens(SimpleNamespace(prompt_tokens_details=SimpleNamespace(cached_tokens=None))) == 0
    assert provider_cached_tokens(None) == 0
    # Anthropic's usage through litellm: reads and writes are both at a cache rate (below and above the input's)
    from evoharness.compiler.runtime.llm import ensure_providers

    ensure_providers()
    from litellm.types.utils import Usage

    anthropic = Usage(prompt_tokens=1050, completion_tokens=10, total_tokens=1060, cache_creation_input_tokens=200,
                      cache_read_input_tokens=800)
    assert provider_cached_tokens(anthropic) == 1000
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 2,
           "latency_s": 0.1, "cost_usd": 0.002}
    for stored, read in ((7, 7), (10, 10), (11, None), (-3, None), (True, None), ("5", None), (2.5, None), (None, None)):
        assert reply_from_record({**rec, "cached_prompt_tokens": stored}, cached=True).cached_prompt_tokens == read
    assert reply_from_record(rec, cached=True).cached_prompt_tokens is None  # cached before the count was kept: not known
    # a stored cost that no bill can be is still a reply (refusing it would pay for the call again); its cost is unknown
    for bad in (math.inf, math.nan, -0.002, 10**400):
        assert is_reply({**rec, "cost_usd": bad}) and reply_from_record({**rec, "cost_usd": bad}, cached=True).cost_usd is None
    # and is worked out again from the route's price table when there is one
    bad = {**rec, "cost_usd": -0.002, "priced_by": "litellm", "cached_prompt_tokens": 0}
    again = client(route="sim/large").billing.reprice(reply_from_record(bad, cached=True))
    assert again.cost_usd == pytest.approx(10 * 3e-6 + 2 * 12e-6)
    # unless how many of its tokens were at a cache rate is not known: then the table is not what litellm billed
    unknown = {k: v for k, v in bad.items() if k != "cached_prompt_tokens"}
    assert client(route="sim/large").billing.reprice(reply_from_record(unknown, cached=True)).cost_usd is None


@pytest.mark.parametrize("litellm_said", [-0.0021, math.inf, math.nan])
def test_a_cost_litellm_gives_that_no_bill_can_be_is_the_price_tables_only_where_that_is_exact(litellm_said: float) -> None:
    from types import SimpleNamespace

    response = SimpleNamespace(_hidden_params={"response_cost": litellm_said})
    # the simulator's tiers are in litellm's map, one rate per token: the call is costed at the table
    assert client(route="sim/large").billing.cost(response, 100, 10) == (pytest.approx(100 * 3e-6 + 10 * 12e-6), "litellm")
    # not where litellm bills another way: cached tokens (reads or writes), a tier above the prompt, a reasoning rate
    assert client(route="gpt-4o-mini").billing.cost(response, 100, 10, 60) == (None, None)
    tiered = _mapped("evoharness-test/tier-in", input_cost_per_token=1e-6, output_cost_per_token=4e-6,
                     input_cost_per_token_above_200k_tokens=2e-6)
    assert client(route=tiered).billing.cost(response, 250_000, 10) == (None, None)
    assert client(route=tiered).billing.cost(response, 1000, 10) == (pytest.approx(1000 * 1e-6 + 10 * 4e-6), "litellm")
    # a route with no table: unknown, or $0 when it is declared free
    assert client(route="openai/no-such-model-here").billing.cost(response, 100, 10) == (None, None)
    assert client(route="openai/no-such-model-here", free=True).billing.cost(response, 100, 10) == (0.0, "free")


def test_a_zero_the_provider_reports_for_a_model_litellm_does_not_map_is_believed_and_stays() -> None:
    from types import SimpleNamespace

    reported = SimpleNamespace(_hidden_params={"response_cost": 0.0})  # e.g. OpenRouter's usage.cost of a free model
    billing = client(route="openrouter/some-free-model-zz").billing
    assert billing.cost(reported, 100, 10) == (0.0, "litellm")
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 100, "completion_tokens": 10,
           "latency_s": 0.1, "cost_usd": 0.0, "priced_by": "litellm", "cached_prompt_tokens": 0}
    assert billing.reprice(reply_from_record(rec, cached=True)).cost_usd == 0.0
    # and a real bill on a route declared free is the bill
    charged = SimpleNamespace(_hidden_params={"response_cost": 0.0042})
    assert client(route="openrouter/some-model-zz", free=True).billing.cost(charged, 100, 10) == (0.0042, "litellm")


def test_a_model_litellm_lists_at_zero_is_unpriced_even_when_litellm_prices_the_reply_at_zero() -> None:
    from types import SimpleNamespace

    zero = _mapped("evoharness-test/listed-at-zero", input_cost_per_token=0.0, output_cost_per_token=0.0)
    response = SimpleNamespace(_hidden_params={"response_cost": 0.0})
    assert client(route=zero).billing.cost(response, 100, 10) == (None, None)
    assert client(route=zero, free=True).billing.cost(response, 100, 10)[0] == 0.0


def test_a_routes_own_price_bills_every_prompt_token_alike_and_reprices_a_cached_reply() -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 1000, "completion_tokens": 10,
           "latency_s": 0.1, "cost_usd": 0.5, "cached_prompt_tokens": 800}
    own = client(input_cost_per_token=1e-6, output_cost_per_token=4e-6).billing.reprice(reply_from_record(rec, cached=True))
    assert own.cost_usd == pytest.approx(1000 * 1e-6 + 10 * 4e-6) and own.cached_prompt_tokens == 0
    assert own.input_cost_usd == pytest.approx(1000 * 1e-6)
    mapped = client(route="sim/large").billing.reprice(reply_from_record(rec, cached=True))
    assert mapped.cost_usd == 0.5 and mapped.cached_prompt_tokens == 800  # litellm's price stays as it was billed


def test_a_cached_reply_priced_on_a_basis_the_route_no_longer_has_is_worked_out_again() -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 1000, "completion_tokens": 10,
           "latency_s": 0.1, "cached_prompt_tokens": 0}
    sim = 1000 * 3e-6 + 10 * 12e-6  # sim/large's table in litellm's map
    # a wrong price of the route's own, removed: litellm's table prices it
    assert client(route="sim/large").billing.reprice(
        reply_from_record({**rec, "cost_usd": 1000.0, "priced_by": "route"}, cached=True)).cost_usd == pytest.approx(sim)
    # cached while the route was declared free, and no longer is: unknown on a route nobody prices
    was_free = reply_from_record({**rec, "cost_usd": 0.0, "priced_by": "free"}, cached=True)
    assert client(route="openai/no-such-model-here").billing.reprice(was_free).cost_usd is None
    assert client(route="openai/no-such-model-here", free=True).billing.reprice(was_free).cost_usd == 0.0
    # a $0 kept before the basis was, on a model litellm lists at $0: unknown, as a fresh call would be
    zero = _mapped("evoharness-test/zero-again", input_cost_per_token=0.0, output_cost_per_token=0.0)
    assert client(route=zero).billing.reprice(reply_from_record({**rec, "cost_usd": 0.0}, cached=True)).cost_usd is None
    # litellm's own bill stays as billed, and an unpriced reply takes the price the route has now
    billed = reply_from_record({**rec, "cost_usd": 0.0025, "priced_by": "litellm"}, cached=True)
    assert client(route="sim/large").billing.reprice(billed).cost_usd == 0.0025
    unpriced = reply_from_record({**rec, "cost_usd": None}, cached=True)
    assert client(route="sim/large").billing.reprice(unpriced).cost_usd == pytest.approx(sim)


def test_a_reply_kept_before_its_cached_tokens_were_counts_none_when_its_cost_is_the_tables() -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 1000, "completion_tokens": 10,
           "latency_s": 0.1}
    at_table = reply_from_record({**rec, "cost_usd": 1000 * 3e-6 + 10 * 12e-6}, cached=True)
    assert at_table.cached_prompt_tokens is None
    assert client(route="sim/large").billing.reprice(at_table).cached_prompt_tokens == 0
    discounted = reply_from_record({**rec, "cost_usd": 0.5 * 1000 * 3e-6 + 10 * 12e-6}, cached=True)
    assert client(route="sim/large").billing.reprice(discounted).cached_prompt_tokens is None  # some at another rate


@pytest.mark.parametrize("tokens", [10**400, -10**9, -1, math.inf, math.nan, 2.5, True, "10"])
def test_a_forged_token_count_is_read_as_none_and_never_prices_below_zero_or_crashes(tokens: object) -> None:
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": tokens, "completion_tokens": tokens,
           "latency_s": 0.1, "cost_usd": None, "priced_by": "route"}
    reply = reply_from_record(rec, cached=True)
    assert reply.prompt_tokens == 0 and reply.completion_tokens == 0
    for billing in (client(route="sim/large").billing, client(input_cost_per_token=1e-6, output_cost_per_token=4e-6).billing):
        cost = billing.reprice(reply).cost_usd
        assert cost is None or cost == 0.0


def test_models_litellm_prices_by_the_hour_or_by_a_list_of_tiers_have_no_exact_table() -> None:
    from types import SimpleNamespace

    bad = SimpleNamespace(_hidden_params={"response_cost": -1.0})
    for extra in ({"off_peak_pricing": {"input_cost_per_token": 5e-7, "output_cost_per_token": 2e-6, "windows": []}},
                  {"tiered_pricing": [{"range": [0, 256000], "input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6}]}):
        name = _mapped(f"evoharness-test/{next(iter(extra))}", input_cost_per_token=1e-6, output_cost_per_token=4e-6, **extra)
        billing = client(route=name).billing
        assert billing.cost(bad, 1000, 10) == (None, None)  # the table is not what litellm bills
        assert billing.input_cost(1000, 10, 0.01) is None


def test_a_zero_on_a_free_route_for_a_model_litellm_lists_at_zero_is_free_and_unknown_once_it_is_not() -> None:
    from types import SimpleNamespace

    zero = _mapped("evoharness-test/zero-free", input_cost_per_token=0.0, output_cost_per_token=0.0)
    said = SimpleNamespace(_hidden_params={"response_cost": 0.0})
    cost, basis = client(route=zero, free=True).billing.cost(said, 100, 10)
    assert (cost, basis) == (0.0, "free")
    rec = {"content": "ok", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 100, "completion_tokens": 10,
           "latency_s": 0.1, "cost_usd": cost, "priced_by": basis, "cached_prompt_tokens": 0}
    assert client(route=zero).billing.reprice(reply_from_record(rec, cached=True)).cost_usd is None
    assert client(route=zero, free=True).billing.reprice(reply_from_record(rec, cached=True)).cost_usd == 0.0
