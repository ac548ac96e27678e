"""Which failures stop a run, which are retried, and when a run has skipped too much: the pure parts,
against litellm's own exception types."""
from __future__ import annotations

import math

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.runtime.models import classify
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.skips import check_max_skip_rate, too_many_skipped

lm = litellm_module()


@pytest.mark.parametrize("exc", [
    # what litellm raises for an OpenAI-compatible route called with no key at all
    lm.InternalServerError(message="OpenAIException - Missing credentials. Please pass an `api_key`", llm_provider="openai", model="m"),
    lm.APIConnectionError(message="The api_key client option must be set either by passing api_key", llm_provider="openai", model="m"),
    lm.AuthenticationError(message="Incorrect API key provided", llm_provider="openai", model="m"),
    lm.BadRequestError(message="Unsupported parameter: 'temperature'", llm_provider="openai", model="m"),
], ids=["missing_key_as_500", "missing_key_as_connection", "401", "400"])
def test_what_every_call_would_repeat_is_fatal(exc: Exception) -> None:
    assert classify(exc) == "fatal"


@pytest.mark.parametrize("exc", [
    lm.InternalServerError(message="upstream overloaded", llm_provider="openai", model="m"),
    lm.RateLimitError(message="slow down", llm_provider="openai", model="m"),
    lm.Timeout(message="no reply", llm_provider="openai", model="m"),
], ids=["500", "429", "timeout"])
def test_outages_are_retried(exc: Exception) -> None:
    assert classify(exc) == "infra"


def episode(i: int, *, skipped: str | None = None) -> EpisodeResult:
    return EpisodeResult(task_id=f"t{i}", sample=0, status="skipped" if skipped else "scored", passed=False, score=0.0, named={},
                         delivered=True, safety_violations=0, cost_usd=0.0, latency_s=0.0, prompt_tokens=0, completion_tokens=0,
                         model_calls=1, tool_calls=0, tool_errors=0, detail="", infra_error=skipped)


def test_a_run_fails_past_max_skip_rate_naming_the_most_common_error() -> None:
    ten = [episode(i) for i in range(8)] + [episode(8, skipped="Timeout after 4 attempts\nmore"),
                                            episode(9, skipped="RateLimitError after 4 attempts")]
    assert too_many_skipped(ten, 0.2) is None  # 2 of 10 is at the limit, not past it
    why = too_many_skipped(ten, 0.1)
    assert why is not None and why.startswith("2 of 10 episodes were skipped") and "\n" not in why
    three = ten + [episode(10, skipped="RateLimitError after 4 attempts")]
    assert "most common (2): RateLimitError" in str(too_many_skipped(three, 0.1))
    assert too_many_skipped([episode(0, skipped="down")], 1.0) is None
    assert too_many_skipped([], 0.0) is None


@pytest.mark.parametrize("bad", [-1, 1.5, math.nan, math.inf, "0.1", True, None])
def test_max_skip_rate_must_be_a_fraction(bad: object) -> None:
    with pytest.raises(ConfigError, match="workload.max_skip_rate"):
        check_max_skip_rate(bad)


def test_a_fixed_seed_in_model_extra_is_refused() -> None:
    """One seed for every request would make every sample the same request, replayed from the cache."""
    from evoharness.compiler.model_extra import check_extra

    with pytest.raises(ConfigError, match=r"model.extra.seed: .*Fix: set the run's seed"):
        check_extra("model.extra", "openai/m", {"seed": 7})


def test_every_sample_gets_its_own_seed_and_a_run_seed_moves_them_all() -> None:
    from evoharness.compiler.runtime.loop import episode_seed
    from evoharness.compiler.runtime.workload import Task

    task, other = (Task(task_id=t, turns=((),), split="train", tool_names=()) for t in ("w/a", "w/b"))
    seeds = {episode_seed(task, sample, 0) for sample in range(50)}
    assert len(seeds) == 50 and all(0 <= s < 2**31 for s in seeds)
    assert episode_seed(task, 0, 0) == episode_seed(task, 0, 0) != episode_seed(task, 0, 1)
    assert episode_seed(task, 0, 0) != episode_seed(other, 0, 0)
