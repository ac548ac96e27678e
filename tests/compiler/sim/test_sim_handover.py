"""A turn handed from one tier to another midway: the simulated model replays each earlier
decision as the tier that made it, so the stronger tier picks up the mistakes actually made."""
from __future__ import annotations

from typing import Any

from evoharness.compiler.sim.tiers import TIERS
from tests.compiler.sim.sim_selfplay import EpisodeLog, openai_tools, play_episode
from tests.compiler.sim.test_sim_fixtures import GOLD, SPECS, TASK, fake_env, prompt

N = 400


def after_an_error(then: str) -> Any:
    """sim/small until a tool result says Error, then ``then`` for the rest of the episode."""
    def route(messages: list[dict[str, Any]]) -> str:
        failed = any(m.get("role") == "tool" and str(m.get("content", "")).startswith("Error") for m in messages)
        return then if failed else "sim/small"
    return route


def play(model: Any, sample: int) -> EpisodeLog:
    return play_episode(model, TASK, GOLD, fake_env, system_prompt=prompt(), tools=openai_tools(SPECS), temperature=1.0,
                        sample=sample, world=0, shared_draws=False)


def recovered(log: EpisodeLog) -> bool | None:
    """After the first failed `cd` of turn 0: whether a later `cd` succeeded (None: no cd failed)."""
    calls = log.calls[0] if log.calls else []
    first = next((i for i, (c, ok) in enumerate(calls) if c.name == "cd" and not ok), None)
    if first is None:
        return None
    return any(c.name == "cd" and ok for c, ok in calls[first + 1:])


def rate(model: Any) -> tuple[float, int]:
    got = [r for r in (recovered(play(model, s)) for s in range(N)) if r is not None]
    return sum(got) / len(got), len(got)


def test_the_stronger_tier_recovers_the_mistake_the_weaker_one_made() -> None:
    alone, n_alone = rate("sim/small")
    handed, n_handed = rate(after_an_error("sim/large"))
    assert n_alone > 30 and n_handed == n_alone  # the same episodes err: the handover comes after small's mistake
    # each recovers at its own tier's rate: large picks up small's failed call as its own to redo
    assert abs(alone - TIERS["small"].recover) < 0.15 and abs(handed - TIERS["large"].recover) < 0.15
    assert handed > alone + 0.15


def test_a_turn_no_one_handed_over_plays_as_before() -> None:
    for s in range(40):
        assert [c for c, _ in play("sim/small", s).calls[0]] == [c for c, _ in play(lambda m: "sim/small", s).calls[0]]
