"""Table tests of the search policy: the round queue, the anchors, dev picks, the champion, the
round winner, the ledger decision and the quality objective. No study, no evaluation."""
from __future__ import annotations

from typing import Any

import pytest

from evoharness.search.evaluation.criteria import Objective, quality_objective
from evoharness.search.genome import BASELINE, Genome, PoolEntry, Pools, initial_pools
from evoharness.search.optimise.seeding import ControlRequest, NewEntry, anchors, round_queue
from evoharness.search.optimise.select import champion_index, dev_picks, distinct_front, ledger_decision, round_winner
from evoharness.search.optimise.study import TrialRecord

AGENT = {
    "name": "a",
    "prompt_sections": {"role": "You help."},
    "tools": ["ls", "cd"],
    "tool_format": "json",
    "workflow": [{"name": "plan", "instructions": "plan"}, {"name": "verify", "instructions": "check", "optional": True, "enabled": False}],
}
BASE_STEPS = {"plan": True, "verify": False}


def pools() -> Pools:
    return initial_pools(AGENT, models=["sim_large"], temperatures=[0.0, 0.7], base_model="base", base_temperature=0.0)


def grown() -> Pools:
    p = pools()
    return Pools(sections={"role": (*p.sections["role"], PoolEntry("You help. Check paths.", "prompt_suffix"))},
                 tools={"ls": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["list first"]}, "tool_rule_add"))},
                 steps=p.steps, toolsets=p.toolsets, models=p.models, temperatures=p.temperatures, formats=("json", "bash"))


def rec(number: int, genome: Genome, q: float, cost: float, *, origin: str = "sampler", vh: str | None = None, **kw: Any) -> TrialRecord:
    return TrialRecord(number=number, round=kw.pop("round", 0), state=kw.pop("state", "COMPLETE"), genome=genome,
                       variant_hash=vh or f"v{number}", train={"pass_rate": q, "cost_per_task": cost}, origin=origin, **kw)


def queue(k: int, p: Pools, front: list[TrialRecord] = [], added: list[NewEntry] = [], controls: list[ControlRequest] = [],  # noqa: B006
          budget: int = 50) -> list[tuple[str, dict[str, Any]]]:
    return [(q.attrs["origin"], q.params) for q in round_queue(k, p, front, added, controls, quality="pass_rate", budget=budget,
                                                                  base_format="json", base_steps=BASE_STEPS)]


BASE_PARAMS = {"step.verify": False, "tool_format": "json", "model": 0, "temperature": 0}


def test_first_round_is_the_baseline_then_one_change_at_a_time_in_parameter_order() -> None:
    q = queue(0, pools())
    assert q == [
        ("baseline", BASE_PARAMS),
        ("one_change", {**BASE_PARAMS, "step.verify": True}),
        ("one_change", {**BASE_PARAMS, "tool_format": "bash"}),
        ("one_change", {**BASE_PARAMS, "tool_format": "both"}),
        ("one_change", {**BASE_PARAMS, "model": 1}),
        ("one_change", {**BASE_PARAMS, "temperature": 1}),
    ]


@pytest.mark.parametrize("budget, expected", [(1, ["baseline"]), (3, ["baseline", "one_change", "one_change"]), (0, [])])
def test_the_budget_cuts_the_queue_from_the_end(budget: int, expected: list[str]) -> None:
    assert [origin for origin, _ in queue(0, pools(), budget=budget)] == expected


def test_later_rounds_queue_baseline_controls_front_then_new_entries_on_each_anchor() -> None:
    p = grown()
    best = rec(1, Genome(model=1, steps={"verify": True}), 0.9, 0.10)
    cheap = rec(2, Genome(steps={"verify": True}), 0.7, 0.01)
    base = rec(0, BASELINE, 0.5, 0.005, origin="baseline")
    front = [base, best, cheap]
    q = queue(1, p, front, added=[NewEntry("tool", "ls", "tool_rule_add")], controls=[ControlRequest(BASELINE, "identity")])
    full = {"section.role": 0, "tool.ls": 0, "step.verify": False, "tool_format": "json", "model": 0, "temperature": 0}
    assert q == [
        ("baseline", full),
        ("control", full),  # the same genome as the baseline, kept: a control draws fresh samples
        ("front", {**full, "step.verify": True, "model": 1}),
        ("front", {**full, "step.verify": True}),
        ("new:tool_rule_add", {**full, "step.verify": True, "model": 1, "tool.ls": 1}),  # on the best quality
        ("new:tool_rule_add", {**full, "step.verify": True, "tool.ls": 1}),  # on the cheapest that beats the baseline
    ]
    # the baseline re-enqueued as a front member is a repeat of the first entry, so it is not queued twice
    assert [o for o, _ in q].count("baseline") == 1 and "front" in [o for o, _ in q]


@pytest.mark.parametrize(
    "front, expected",
    [
        ([], [BASELINE]),
        # best quality and cheapest-beating-baseline differ: both
        ([rec(0, BASELINE, 0.5, 1.0, origin="baseline"), rec(1, Genome(model=1), 0.9, 10.0), rec(2, Genome(temperature=1), 0.6, 2.0),
          rec(3, Genome(tool_format="bash"), 0.4, 0.5)], [Genome(model=1), Genome(temperature=1)]),
        # the best is also the cheapest that beats the baseline: one anchor
        ([rec(0, BASELINE, 0.5, 1.0, origin="baseline"), rec(1, Genome(model=1), 0.9, 0.8)], [Genome(model=1)]),
        # nothing beats the baseline: a cheap member below it cannot become the best, so the best alone
        ([rec(0, BASELINE, 0.5, 1.0, origin="baseline"), rec(3, Genome(tool_format="bash"), 0.4, 0.5)], [BASELINE]),
    ],
)
def test_anchors(front: list[TrialRecord], expected: list[Genome]) -> None:
    assert anchors(front, "pass_rate") == expected


@pytest.mark.parametrize(
    "count, cap, expected",
    [(0, 6, []), (3, 6, [0, 1, 2]), (6, 6, [0, 1, 2, 3, 4, 5]), (10, 6, [0, 2, 4, 5, 7, 9]), (10, 2, [0, 9]), (10, 1, [0]), (10, 0, [0])],
)
def test_dev_picks_span_the_front_from_best_to_cheapest(count: int, cap: int, expected: list[int]) -> None:
    assert dev_picks(count, cap) == expected


def test_distinct_front_keeps_one_member_per_variant_best_quality_first() -> None:
    a1, a2 = rec(1, Genome(model=1), 0.8, 1.0, vh="A"), rec(5, Genome(model=1), 0.9, 1.0, vh="A")
    b = rec(2, BASELINE, 0.5, 0.1, vh="B")
    assert [(r.variant_hash, r.number) for r in distinct_front([b, a1, a2], "pass_rate")] == [("A", 5), ("B", 2)]


@pytest.mark.parametrize(
    "keys, expected",
    [([(1.0, 1.0, 0.2)], 0), ([(0.0, 1.0, 0.9), (1.0, 0.0, 0.1)], 1), ([(1.0, 1.0, 0.5), (1.0, 1.0, 0.5)], 0),
     ([(1.0, 0.0, 0.1), (1.0, 1.0, -0.5)], 1)],
)
def test_champion_is_the_largest_rank_key_and_the_first_of_equals(keys: list[tuple[float, ...]], expected: int) -> None:
    assert champion_index(keys) == expected


def test_champion_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no ranked candidate"):
        champion_index([])


def test_round_winner_is_the_best_train_quality() -> None:
    best = [rec(1, Genome(model=1), 0.7, 1.0), rec(2, Genome(model=2), 0.9, 9.0), rec(3, Genome(model=3), 0.9, 0.1)]
    winner = round_winner(best, "pass_rate")
    assert winner is not None and winner.number == 2
    assert round_winner([], "pass_rate") is None
    assert round_winner([TrialRecord(number=1, round=0, state="FAIL", genome=None)], "pass_rate") is None


@pytest.mark.parametrize(
    "state, vh, feasible, expected",
    [("FAIL", "C", True, "failed"), ("COMPLETE", "C", True, "champion"), ("COMPLETE", "F", True, "front"),
     ("COMPLETE", "X", True, "dominated"), ("COMPLETE", "X", False, "infeasible"), ("RUNNING", "F", True, "failed")],
)
def test_ledger_decision(state: str, vh: str, feasible: bool, expected: str) -> None:
    r = TrialRecord(number=0, round=0, state=state, genome=BASELINE, variant_hash=vh, feasible=feasible)
    assert ledger_decision(r, front={"C", "F"}, champion="C") == expected


@pytest.mark.parametrize(
    "objectives, expected",
    [
        ((Objective("pass_rate", "maximize"), Objective("cost_per_task", "minimize")), "pass_rate"),
        ((Objective("cost_per_task", "minimize"), Objective("score_mean", "maximize"), Objective("pass_rate", "maximize")), "score_mean"),
        (({"metric": "cost_per_task", "direction": "minimize"}, {"metric": "pass_rate", "direction": "maximize"}), "pass_rate"),
        ((Objective("cost_per_task", "minimize"),), "score_mean"),
        ((), "score_mean"),
    ],
)
def test_quality_objective(objectives: tuple[Any, ...], expected: str) -> None:
    assert quality_objective(objectives) == expected


def _dev(quality: float, cost: float, feasible: bool = True, low: float | None = None):
    from evoharness.search.optimise.select import DevCandidate

    return DevCandidate(quality, quality - 0.85 if low is None else low, cost, feasible)


@pytest.mark.parametrize("candidates, margin, expected", [
    ([_dev(0.9, 0.10), _dev(0.82, 0.02, low=-0.04), _dev(0.70, 0.001)], 0.05, (1, "interval")),  # cheapest whose interval clears
    ([_dev(0.9, 0.10), _dev(0.82, 0.02, False, -0.01), _dev(0.70, 0.001)], 0.05, (0, "interval")),  # infeasible is never picked
    ([_dev(0.9, 0.10), _dev(0.85, 0.10)], 0.0, (0, "interval")),  # equal cost: the better quality
    ([_dev(0.5, 0.01)], 0.05, None),  # nothing is non-inferior, not even its point estimate
    ([_dev(0.80, 0.03, low=0.0), _dev(0.80, 0.03, low=0.0)], 0.05, (0, "interval")),  # exact tie: the first
    # a lucky dev point estimate within the margin (0.82 vs 0.85) whose interval does not clear -0.05
    # loses to a dearer member whose interval does
    ([_dev(0.82, 0.01, low=-0.12), _dev(0.86, 0.05, low=-0.03)], 0.05, (1, "interval")),
    ([_dev(0.82, 0.01, low=-0.12), _dev(0.60, 0.005, low=-0.3)], 0.05, (0, "point")),  # only point estimates: flagged
])
def test_cheapest_noninferior(candidates, margin: float, expected) -> None:
    from evoharness.search.optimise.select import cheapest_noninferior

    assert cheapest_noninferior(candidates, reference=0.85, margin=margin) == expected


def test_cheapest_noninferior_never_picks_what_costs_more_than_the_incumbent() -> None:
    from evoharness.search.optimise.select import cheapest_noninferior

    assert cheapest_noninferior([_dev(0.9, 0.12), _dev(0.85, 0.085)], reference=0.85, margin=0.05, reference_cost=0.078) is None
    assert cheapest_noninferior([_dev(0.9, 0.12), _dev(0.85, 0.05)], reference=0.85, margin=0.05, reference_cost=0.078) == (1, "interval")


@pytest.mark.parametrize("costs, cap, expected", [
    ([0.07, 0.09, 0.08, 0.01, 0.05, 0.06, 0.02], 6, [0, 1, 2, 3, 4, 6]),  # the cheapest (3) is never skipped
    ([0.07, 0.09, 0.08, 0.01], 2, [0, 3]),  # best quality and cheapest
    ([0.07, 0.09, 0.08, 0.01], 1, [0]),  # one slot: the best quality
    ([0.05, 0.01], 6, [0, 1]),  # all fit
])
def test_dev_members_always_include_the_cheapest_and_the_best(costs: list[float], cap: int, expected: list[int]) -> None:
    from evoharness.search.optimise.select import dev_members

    picks = dev_members(costs, cap)
    assert picks == expected and len(picks) <= max(1, cap)


def test_a_best_quality_rule_spends_the_dev_runs_on_the_best_on_train() -> None:
    from evoharness.search.optimise.select import dev_members

    costs = [0.07, 0.09, 0.08, 0.01, 0.05]  # best quality first; the cheap end (3) cannot win on quality
    assert dev_members(costs, 3) == [0, 1, 3]  # a cost rule: spread along cost, the cheapest among them
    assert dev_members(costs, 3, best_quality=True) == [0, 1, 2]
    assert dev_members(costs[:2], 3, best_quality=True) == [0, 1] and dev_members(costs, 0, best_quality=True) == [0]


def test_every_new_entry_of_one_slot_is_tried_under_its_own_author() -> None:
    """Three mutators add entries to the ls tool in one round: each is queued on the anchor with its
    own pool index and labelled with its own author (the old rule tried only the newest entry)."""
    from evoharness.search.genome_edits import authors
    from evoharness.search.mutators.base import Proposal, grow_pools
    from evoharness.search.optimise.mutation import new_entries

    base = pools()
    p = Pools(sections=base.sections,
              tools={"ls": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["list first"]}, "tool_rule_add"),
                            PoolEntry({"rules": ["name the folder"]}, "rule_miner"),
                            PoolEntry({"description_append": "Lists files."}, "tool_description_append"))},
              steps=base.steps, toolsets=base.toolsets, models=base.models, temperatures=base.temperatures, formats=("json",))
    added = [NewEntry("tool", "ls", "tool_rule_add", index=1), NewEntry("tool", "ls", "rule_miner", index=2),
             NewEntry("tool", "ls", "tool_description_append", index=3)]
    q = round_queue(1, p, [rec(0, BASELINE, 0.5, 0.005, origin="baseline")], added, [], quality="pass_rate", budget=50,
                    base_format="json", base_steps=BASE_STEPS)
    new = [(x.attrs["origin"], x.params["tool.ls"]) for x in q if x.attrs["origin"].startswith("new:")]
    assert new == [("new:tool_rule_add", 1), ("new:rule_miner", 2), ("new:tool_description_append", 3)]
    for origin, index in new:  # the genome's authors agree with the label
        assert authors(Genome(tools={"ls": index}), p, ["plan", "verify"]) == (origin.removeprefix("new:"),)
    assert all(e.chosen_by(Genome(tools={"ls": e.index})) for e in added)
    assert not added[0].chosen_by(Genome(tools={"ls": 2}))
    assert NewEntry.from_dict({"kind": "tool", "key": "ls", "author": "x"}).index is None  # a round stored before: the newest

    # and the indices come from growing the pools in order (a tool with no edit yet starts at 1)
    proposals = [Proposal("tool", "cd", PoolEntry({"rules": [f"rule {i}"]}, f"m{i}")) for i in range(3)]
    grown_pools, kept, _ = grow_pools(base, proposals)
    entries = new_entries(base, kept)
    assert [(e.author, e.index) for e in entries] == [("m0", 1), ("m1", 2), ("m2", 3)]
    assert [grown_pools.tools["cd"][e.index].author for e in entries if e.index is not None] == ["m0", "m1", "m2"]


def test_re_reads_of_earlier_rounds_do_not_use_up_the_queue_budget() -> None:
    """Budget 2 in round 1: the baseline and the front are free re-reads, the control and the first
    new entry are paid; before, the re-reads filled the budget and no new entry was queued."""
    p = grown()
    best = rec(1, Genome(model=1, steps={"verify": True}), 0.9, 0.10)
    cheap = rec(2, Genome(steps={"verify": True}), 0.7, 0.01)
    front = [rec(0, BASELINE, 0.5, 0.005, origin="baseline"), best, cheap]
    q = queue(1, p, front, added=[NewEntry("tool", "ls", "tool_rule_add", index=1)], controls=[ControlRequest(BASELINE, "identity")],
              budget=2)
    assert [o for o, _ in q] == ["baseline", "control", "front", "front", "new:tool_rule_add"]
    assert [o for o, _ in queue(0, pools(), budget=2)] == ["baseline", "one_change"]  # round 0's baseline is paid


def test_proposals_no_trial_carried_are_handed_to_the_next_round() -> None:
    import optuna

    from evoharness.search.optimise.mutation import RoundPools
    from evoharness.search.optimise.rounds import round_line, unevaluated

    study = optuna.create_study(directions=["maximize"])
    for genome in (BASELINE, Genome(tools={"ls": 1})):
        study.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={"genome": genome.to_dict(), "eval_key": str(genome)}))
    reached, missed = NewEntry("tool", "ls", "tool_rule_add", index=1), NewEntry("tool", "ls", "rule_miner", index=2)
    rp = RoundPools(grown(), (reached, missed))
    assert unevaluated(study, rp) == (missed,)
    line = round_line(1, study, rp, [], earlier=(), missed=unevaluated(study, rp))
    assert "proposals: 2 made, 1 evaluated, 1 not reached" in line and "2 paid evaluations, 0 free re-reads" in line


def test_under_cheapest_noninferior_the_cheap_anchor_is_the_cheapest_within_the_margin() -> None:
    base = rec(0, BASELINE, 0.775, 0.096, origin="baseline")
    best = rec(1, Genome(steps={"verify": True}), 0.825, 0.137)
    medium = rec(2, Genome(model=1, steps={"verify": True}), 0.725, 0.037)  # 0.05 below the baseline
    small = rec(3, Genome(model=1), 0.375, 0.005)
    front = [base, best, medium, small]
    # better than the baseline: only the dear member, so both anchors are the big model
    assert anchors(front, "pass_rate") == [best.genome]
    # within the 0.05 margin: the cheap medium model gets the new entries too
    assert anchors(front, "pass_rate", margin=0.05) == [best.genome, medium.genome]
    # none cheaper is within 0.01 yet: the cheaper member closest to qualifying (not the baseline itself)
    assert anchors(front, "pass_rate", margin=0.01) == [best.genome, medium.genome]
    assert anchors([best, base], "pass_rate", margin=0.01) == [best.genome, base.genome]  # nothing cheaper at all


def test_dev_runs_go_only_to_members_that_can_qualify_the_cheapest_first() -> None:
    from evoharness.search.optimise.select import dev_members, dev_skips

    costs = [1.0, 0.04, 0.03, 0.025, 0.004, 0.003]  # best quality first
    chances = ["none", "likely", "likely", "none", "none", "none"]  # only two cheap members are within reach of the bar on train
    assert dev_members(costs, 4) == [0, 2, 3, 5]  # without chances: the spread, which skips a member within reach
    # the free slots stay empty: the three cheapest cannot qualify, so no dev run is spent on them
    assert dev_members(costs, 4, chances=chances) == [0, 1, 2]
    assert dev_members(costs, 4, chances=["none"] * 6) == [0]  # the best on train always, however far it is from the bar
    # one slot beside the best: the cheapest that can qualify (2), not the cheaper ones that cannot (3, 4, 5)
    assert dev_members(costs, 2, chances=chances) == [0, 2]
    # a member only the upper end of its interval brings within reach comes after those whose point estimate is,
    # and still before any that cannot qualify
    assert dev_members(costs, 3, chances=["none", "likely", "possible", "none", "possible", "none"]) == [0, 1, 4]
    assert dev_members(costs, 4, chances=["none", "likely", "possible", "none", "possible", "none"]) == [0, 1, 2, 4]
    assert dev_members(costs, 2, chances=["none", "possible", "shown", "none", "possible", "none"]) == [0, 2]
    assert dev_members([], 4, chances=[]) == []
    reasons = [None, None, None, "far below", "far below", "not cheaper"]
    assert dev_skips(6, dev_members(costs, 2, chances=chances), reasons, cap=2) == {
        1: "no dev run left (search.max_front_dev=2)", 3: "far below", 4: "far below", 5: "not cheaper"}
    with pytest.raises(ValueError, match="chances names 2 members, costs 6"):
        dev_members(costs, 4, chances=["likely", "likely"])


def test_under_best_quality_the_dev_runs_go_to_the_best_on_train_that_can_beat_the_incumbent() -> None:
    from evoharness.search.optimise.select import dev_members

    costs = [0.07, 0.09, 0.08, 0.01, 0.05]
    assert dev_members(costs, 3, best_quality=True, chances=["possible"] * 5) == [0, 1, 2]  # today's order: the best on train
    assert dev_members(costs, 3, best_quality=True, chances=["likely", "none", "possible", "likely", "shown"]) == [0, 2, 3]


def standing(quality: float, cost: float, low: float | None = None, high: float | None = None) -> Any:
    from evoharness.search.evaluation.decision import TrainStanding

    return TrainStanding(quality=quality, resource=cost, low=low, high=high)


def test_a_member_has_a_dev_chance_only_within_reach_of_the_rules_bar() -> None:
    from evoharness.search.evaluation.decision import decision_rule

    rule, incumbent = decision_rule("cheapest_noninferior", margin=0.05), standing(0.725, 0.09)

    def chance(member: Any) -> tuple[str, str | None]:
        c = rule.train_chance(member, incumbent, min_effect=0.03, quality="pass_rate", against="incumbent")
        return c.reach, c.why

    # sim_small at 0.250 against 0.725: even the upper end of its paired difference is far below -0.05
    assert chance(standing(0.250, 0.005, -0.62, -0.31)) == (
        "none", "train pass_rate 0.250 against the incumbent's 0.725: the paired difference is at most -0.310, below the bar -0.05")
    assert chance(standing(0.600, 0.024, -0.40, -0.02)) == ("possible", None)  # within reach on its interval only
    assert chance(standing(0.600, 0.024, -0.40, -0.05)) == ("possible", None)  # at the bar
    assert chance(standing(0.700, 0.024, -0.30, 0.25)) == ("likely", None)  # its point estimate is within the margin
    assert chance(standing(0.900, 0.024, -0.02, 0.40)) == ("shown", None)
    assert chance(standing(0.900, 0.134, 0.05, 0.30)) == (
        "none", "not cheaper than the incumbent on train ($0.134/task against $0.09/task)")
    assert chance(standing(0.725, 0.09, 0.0, 0.0))[0] == "none"  # the incumbent itself saves nothing
    assert chance(standing(0.100, 0.005)) == ("possible", None)  # no paired evidence: the dev run decides on quality
    fast = decision_rule("fastest_noninferior", margin=0.05).train_chance(standing(0.7, 2.5, -0.1, 0.1), standing(0.7, 1.9),
                                                                          min_effect=0.03, quality="pass_rate", against="sim_large")
    assert fast.why == "not faster than the sim_large on train (2.5s against 1.9s)"
    # best quality: the bar is +min_effect, and cost is no reason
    best = decision_rule("best_quality")
    assert best.train_chance(standing(0.8, 9.0, -0.2, 0.02), incumbent, min_effect=0.03, quality="pass_rate").reach == "none"
    assert best.train_chance(standing(0.8, 9.0, -0.2, 0.05), incumbent, min_effect=0.03, quality="pass_rate").reach == "likely"


def _train(name: str, passes: list[float]) -> Any:
    from evoharness.search.evaluation.metrics import EvalReport, TaskRow

    rows = tuple(TaskRow(f"t{i:02d}", 2, p, p, 0.0, 0.01, 1.0, cluster=f"s{i // 4}") for i, p in enumerate(passes))
    return EvalReport(name, "train", 2, (), {"pass_rate": sum(passes) / len(passes)}, rows)


def test_the_paired_train_interval_has_clusters_as_the_unit() -> None:
    from evoharness.search.optimise.select_dev import paired_interval

    incumbent = _train("base", [1.0, 1.0, 1.0, 0.0] * 7 + [1.0, 0.0, 1.0, 1.0] * 3)  # 40 tasks in 10 clusters, 0.75
    small = _train("small", [0.0, 0.0, 0.0, 0.0] * 10)
    near = _train("near", [1.0, 1.0, 0.0, 0.0] + [1.0, 1.0, 1.0, 0.0] * 6 + [1.0, 0.0, 1.0, 1.0] * 3)  # 0.725
    far = paired_interval(incumbent, small, metric="pass_rate", confidence=0.95)
    close = paired_interval(incumbent, near, metric="pass_rate", confidence=0.95)
    assert far is not None and far[1] < -0.05  # cannot qualify at a 0.05 margin
    assert close is not None and close[0] < -0.05 < close[1]
    flat = _train("flat", [1.0, 0.0, 0.0, 0.0] * 10)
    clustered = paired_interval(incumbent, flat, metric="pass_rate", confidence=0.95)
    one_per_task = paired_interval(_one_cluster_each(incumbent), _one_cluster_each(flat), metric="pass_rate", confidence=0.95)
    assert clustered is not None and one_per_task is not None and clustered[1] != pytest.approx(one_per_task[1])
    assert paired_interval(incumbent, None, metric="pass_rate", confidence=0.95) is None


def _one_cluster_each(report: Any) -> Any:
    from dataclasses import replace

    return replace(report, tasks=tuple(replace(r, cluster=r.task_id) for r in report.tasks))
