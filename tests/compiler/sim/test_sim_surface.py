"""Blind response surfaces: a test bed whose cue words the harness cannot know."""
from __future__ import annotations

import pytest

from evoharness.compiler.sim import errors
from evoharness.compiler.sim.faults import SimConfig, configure_sim, reset_sim, with_overrides
from evoharness.compiler.sim.features import extract_features
from evoharness.compiler.sim.rewriter import rewrite_reply
from evoharness.compiler.sim.surface import RANGES, REVIEW_POOL, RULE_POOL, blind_surface, surface_for
from evoharness.compiler.sim.tiers import TIERS
from tests.compiler.sim.test_sim_fixtures import passed, play, prompt

N = 120
SEEDS = range(300)


def test_a_blind_surface_is_a_pure_function_of_its_seed_within_the_documented_ranges():
    surfaces = [blind_surface(s) for s in SEEDS]
    assert blind_surface(7) == surfaces[7] and blind_surface(7) != blind_surface(8)
    for s in surfaces:
        assert set(s.review_cues) <= set(REVIEW_POOL) and set(s.rule_cues) <= set(RULE_POOL)
        for name, (lo, hi) in RANGES.items():
            value = getattr(s, name)
            assert lo <= value <= hi or (name == "rule_stop" and value == 0.0), (s.name, name, value)
        assert not s.redo_exact
    assert len({s.review_cues for s in surfaces}) > 30  # the vocabulary really varies
    assert 0.1 < sum(not s.rule_cues for s in surfaces) / len(surfaces) < 0.4
    assert any(s.procedure > 1 for s in surfaces) and any(s.procedure < 1 for s in surfaces)  # a procedure can hurt
    assert 0.05 < sum(s.rule_stop > 0 for s in surfaces) / len(surfaces) < 0.95  # and so can rules
    assert sum("verify" in s.review_cues for s in surfaces) < len(surfaces) / 3  # the documented word is one of many


def _seed(**want: bool) -> int:
    """The first blind seed whose review cues hold (True) or lack (False) each named word."""
    return next(s for s in SEEDS if all((w in blind_surface(s).review_cues) == v for w, v in want.items()))


def test_on_a_blind_surface_a_review_step_works_only_with_a_live_word():
    seed = _seed(verify=False, review=True)
    surface = blind_surface(seed)

    def run(name: str, text: str) -> list:
        return [play(sample=s, procedure=(("act", "Call the tools in order."), (name, text)), surface=surface, step=name)
                for s in range(N)]

    dead = run("verify_results", "Verify each tool result against what was asked; redo wrong calls.")
    live = run("review_results", "Review each tool result against what was asked; redo wrong calls.")
    assert not any(r.state.verified for log in dead for r in log.results)  # "verify" is just a word here
    assert any(r.state.verified for log in live for r in log.results)
    assert sum(map(passed, live)) > sum(map(passed, dead))


def test_on_the_documented_surface_verify_is_the_review_word():
    logs = [play(sample=s, procedure=(("review_results", "Review each result."),), step="review_results") for s in range(30)]
    assert not any(r.state.verified for log in logs for r in log.results)
    logs = [play(sample=s, procedure=(("verify_results", "Verify each result."),), step="verify_results") for s in range(30)]
    assert any(r.state.verified for log in logs for r in log.results)


def test_a_live_rule_lowers_the_rate_and_a_dead_one_does_not():
    seed = next(s for s in SEEDS if blind_surface(s).rule_cues and "always" not in blind_surface(s).rule_cues)
    surface = blind_surface(seed)
    call = errors.CallContext("mkdir", ("dir_name",))

    def rate(rule: str) -> float:
        features = extract_features(prompt(sections=(("Role", "You manage files."), ("Rules", rule))), None, 0.0)
        return errors.call_error_rates(TIERS["small"], features, call, surface).wrong_value["dir_name"]

    plain, dead = rate("Be helpful."), rate("- mkdir: always give dir_name as written")
    live = rate(f"- mkdir: {surface.rule_cues[0]} give dir_name as written")
    assert live == pytest.approx(plain * surface.rule_arg, rel=0.05)  # a dead rule only lengthens the prompt
    assert dead >= plain and dead < plain * 1.01


def test_a_procedure_raises_premature_stops_on_a_surface_where_it_hurts():
    surface = next(blind_surface(s) for s in SEEDS if blind_surface(s).procedure > 1.1)
    call = errors.CallContext("mv", ("source", "destination"))
    plain = extract_features(prompt(), None, 0.0)
    stepped = extract_features(prompt(procedure=(("act", "Call the tools in order."),)), None, 0.0)
    assert errors.call_error_rates(TIERS["small"], stepped, call, surface).premature_stop > \
        errors.call_error_rates(TIERS["small"], plain, call, surface).premature_stop
    assert errors.call_error_rates(TIERS["small"], stepped, call).premature_stop < \
        errors.call_error_rates(TIERS["small"], plain, call).premature_stop  # documented: it helps


def test_redone_calls_are_drawn_like_any_call_on_a_blind_surface_and_exact_on_the_documented_one():
    surface = blind_surface(_seed(review=True))
    step = (("act", "Call the tools in order."), ("review", "Review each result; redo wrong calls."))
    blind = [play(sample=s, procedure=step, surface=surface, step="review", temperature=1.5) for s in range(N)]
    redos = [r.action for log in blind for r in log.results if r.action.reason == "redo"]
    assert redos and any(a.error is not None for a in redos)
    doc = [play(sample=s, procedure=(("act", "x"), ("verify", "Verify.")), step="verify", temperature=1.5) for s in range(N)]
    doc_redos = [r.action for log in doc for r in log.results if r.action.reason == "redo"]
    assert doc_redos and all(a.error is None for a in doc_redos)


def _request(evidence: str) -> list[dict]:
    return [{"role": "user", "content": f"<current>\nBe careful.\n</current>\n<evidence>\n{evidence}\n</evidence>"}]


def test_the_blind_rewriter_draws_its_phrasing_from_a_pool_and_is_deterministic():
    evidences = [f"- wrong value for `tool{i}.arg{i}`" for i in range(20)]
    replies = [rewrite_reply("mutator/llm_prompt_rewriter", _request(e), blind=True) for e in evidences]
    assert replies == [rewrite_reply("mutator/llm_prompt_rewriter", _request(e), blind=True) for e in evidences]
    shapes = {r.split("\n- ", 1)[1].replace("tool", "T").split("`")[0] + r.split("`")[-1] for r in replies if r}
    assert len(shapes) >= 3
    documented = {rewrite_reply("mutator/llm_prompt_rewriter", _request(e)) for e in evidences[:3]}
    assert all("double-check" in r for r in documented if r)
    steps = {rewrite_reply("mutator/llm_workflow_editor", _request(e), blind=True) for e in evidences}
    assert len({s.split('"name": "')[1].split('"')[0] for s in steps if s}) >= 3


def test_the_surface_is_a_validated_knob_and_part_of_the_cache_tag():
    from evoharness.compiler.sim.provider import sim_cache_tag

    with pytest.raises(ValueError, match="sim_faults.surface='hidden'"):
        with_overrides(SimConfig(), {"surface": "hidden"})
    with pytest.raises(ValueError, match="sim_faults.surface_seed='3'"):
        with_overrides(SimConfig(), {"surface_seed": "3"})
    with pytest.raises(ValueError, match="surface='x'"):
        SimConfig(surface="x")
    with pytest.raises(ValueError, match="not a simulator surface"):
        surface_for("x", 0)
    assert with_overrides(SimConfig(), {"surface": "blind", "surface_seed": 4}).surface_seed == 4
    try:
        before = sim_cache_tag("sim/small")
        configure_sim(None, surface="blind", surface_seed=3)
        three = sim_cache_tag("sim/small")
        configure_sim(None, surface_seed=4)
        assert len({before, three, sim_cache_tag("sim/small")}) == 3 and "blind:3" in three
    finally:
        reset_sim()
