"""Edits accumulate: each anchor gets proposals from its own failures, built on what it picks;
proposals are tried on their own anchor first, ranked by their evidence; a full slot retires an
entry no front member uses, never one waiting to be tried."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from evoharness.compiler.runtime.workload import Failure as Record
from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.genome import BASELINE, Genome, PoolEntry, Pools, initial_pools
from evoharness.search.genome_params import param_space
from evoharness.search.mutators.base import FailedEpisode, FunctionMutator, make_mutator, proposal
from evoharness.search.mutators.wordings import STEP_KINDS
from evoharness.search.optimise.mutation import mutate
from evoharness.search.optimise.seeding import NewEntry, round_queue
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.pool_growth import live_len, retire_one

AGENT = {"name": "a", "prompt_sections": {"role": "You help."}, "tools": ["ls", "cd"], "tool_format": "json",
         "workflow": [{"name": "verify", "instructions": "check", "optional": True, "enabled": False}]}


def rec(number: int, genome: Genome, q: float, cost: float, origin: str = "sampler") -> TrialRecord:
    return TrialRecord(number=number, round=0, state="COMPLETE", genome=genome, variant_hash=f"v{number}",
                       train={"pass_rate": q, "cost_per_task": cost}, origin=origin)


def slot_pools(n: int) -> Pools:
    base = initial_pools(AGENT, models=["m"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    return Pools(sections={"role": tuple([base.sections["role"][0]] + [PoolEntry(f"You help. {i}", "x") for i in range(1, n)])},
                 steps=base.steps, toolsets=base.toolsets, models=base.models, temperatures=base.temperatures)


def test_retiring_keeps_indices_but_leaves_the_sampler() -> None:
    p = slot_pools(4)
    assert live_len(p, "section", "role") == 4
    p2, ok = retire_one(p, "section", "role", keep=[1])
    assert ok and [e.retired for e in p2.sections["role"]] == [False, False, True, False]  # the oldest outside keep
    assert param_space(p2)["section.role"] == (0, 1, 3) and live_len(p2, "section", "role") == 3
    assert p2.sections["role"][2].value == "You help. 2"  # index 2 still means what it meant
    assert Pools.from_dict(p2.to_dict()) == p2
    p3, ok = retire_one(p2, "section", "role", keep=[1, 3])
    assert not ok and p3 == p2  # nothing left to retire: the baseline never is
    assert retire_one(p, "model", None, keep=[]) == (p, False)


def test_entries_go_to_their_own_anchor_before_any_other() -> None:
    p = Pools(sections={"role": (PoolEntry("You help.", "baseline"), PoolEntry("You help. A", "m1"), PoolEntry("You help. B", "m2"))},
              tools={"ls": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["r"]}, "m3"))},
              steps=slot_pools(1).steps, toolsets=slot_pools(1).toolsets,
              models=(PoolEntry("base", "baseline"), PoolEntry("m", "baseline")),
              temperatures=slot_pools(1).temperatures, formats=("json",))
    base = rec(0, BASELINE, 0.8, 1.0, "baseline")
    best = rec(1, Genome(steps={"verify": True}), 0.9, 1.5)
    cheap = rec(2, Genome(model=1, steps={"verify": True}), 0.78, 0.2)
    added = [NewEntry("section", "role", "m1", index=1, anchor=cheap.genome, support=5),
             NewEntry("tool", "ls", "m3", index=1, anchor=best.genome, support=2)]
    q = round_queue(1, p, [base, best, cheap], added, [], quality="pass_rate", budget=2, base_format="json",
                    base_steps={"verify": False}, margin=0.05)
    new = [(x.attrs["origin"], x.params["model"], x.params["section.role"], x.params["tool.ls"]) for x in q
           if x.attrs["origin"].startswith("new:")]
    # budget 2: each proposal once, on the anchor it was made for; the cross-tries wait
    assert new == [("new:m1", 1, 1, 0), ("new:m3", 0, 0, 1)]
    q = round_queue(1, p, [base, best, cheap], added, [], quality="pass_rate", budget=4, base_format="json",
                    base_steps={"verify": False}, margin=0.05)
    assert [x.params["model"] for x in q if x.attrs["origin"].startswith("new:")] == [1, 0, 0, 1]
    entry = NewEntry.from_dict(added[0].to_dict())
    assert entry == added[0] and entry.anchor == cheap.genome and entry.support == 5


@pytest.fixture()
def settings(tmp_path: Path) -> Iterator[RunSettings]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "mutators.pool_size=3"])
    GlobalHydra.instance().clear()
    yield RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


def wrong(task: str, tool: str, arg: str, genome: Genome) -> FailedEpisode:
    return FailedEpisode(task, failures=(Record("wrong_value", tool, arg, "secret_value_1", "x", 0),), genome=genome)


def test_each_anchor_gets_rules_for_its_own_failures_on_top_of_what_it_picks(settings: RunSettings) -> None:
    base = initial_pools(settings.agent, models=["sim_small"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    pools = Pools(sections={**base.sections, "policy": (*base.sections["policy"],
                                                        PoolEntry(base.sections["policy"][0].value + "\n- old rule", "rule_miner"))},
                  steps=base.steps, toolsets=base.toolsets, models=base.models, temperatures=base.temperatures)
    big = rec(1, Genome(), 0.8, 1.0, "baseline")
    small = rec(2, Genome(model=1, sections={"policy": 1}), 0.78, 0.1)
    evidence = [wrong("t/1", "mv", "destination", big.genome),
                *(wrong(f"t/{i}", "cd", "folder", small.genome) for i in range(2, 5))]
    rp = mutate(replace(settings, pool_size=4), 1, pools, [big, small], evidence,
                mutators=[(make_mutator("rule_miner", targets="section"), 1.0)], run_teacher=None, echo=lambda _: None)
    [(a1, n1, on_big), (a2, n2, on_small)] = [(e.anchor, e.support, rp.pools.sections["policy"][e.index or 0].value)
                                              for e in rp.added]
    # one proposal per anchor in turn (the best-quality anchor first), each with its own support
    assert (a1, n1, a2, n2) == (big.genome, 1, small.genome, 3)
    # the small model's entry extends its own line (the old rule stays); the big one's starts from its own text;
    # each lists every pair the front got wrong, its own anchor's most frequent first
    assert "- old rule" in on_small and on_small.index("`cd`") < on_small.index("`mv`") and "`folder`" in on_small
    assert "- old rule" not in on_big and "`mv`" in on_big and "`cd`" in on_big
    assert "secret_value_1" not in repr(rp.pools.to_dict())


def test_a_full_slot_retires_what_no_front_member_picks_never_a_waiting_entry(settings: RunSettings) -> None:
    base = initial_pools(settings.agent, models=["sim_small"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    text = base.sections["policy"][0].value
    pools = Pools(sections={**base.sections, "policy": (*base.sections["policy"], PoolEntry(text + "\n- one", "a"),
                                                        PoolEntry(text + "\n- two", "b"))},
                  steps=base.steps, toolsets=base.toolsets, models=base.models, temperatures=base.temperatures)
    front = [rec(1, Genome(sections={"policy": 2}), 0.8, 1.0, "baseline")]
    evidence = [wrong(f"t/{i}", "cd", "folder", front[0].genome) for i in range(3)]
    waiting = [Genome(sections={"policy": 1})]
    rp = mutate(settings, 1, pools, front, evidence, mutators=[(make_mutator("rule_miner", targets="section"), 1.0)],
                run_teacher=None, echo=lambda _: None, keep=waiting)
    assert rp.added == ()  # pool_size 3 is full: entry 1 waits, entry 2 is on the front, so nothing can go
    rp = mutate(settings, 1, pools, front, evidence, mutators=[(make_mutator("rule_miner", targets="section"), 1.0)],
                run_teacher=None, echo=lambda _: None)
    [entry] = rp.added
    assert [e.retired for e in rp.pools.sections["policy"]] == [False, True, False, False] and entry.index == 3
    assert "- two" in rp.pools.sections["policy"][3].value  # built on the anchor's own entry




def test_the_entries_that_improved_an_anchor_are_combined_for_the_next_round() -> None:
    from evoharness.search.optimise.seeding import accumulated

    anchor = Genome(model=1, steps={"verify": True})

    def tried(n: int, q: float, **genes: object) -> TrialRecord:
        return replace(rec(n, replace(anchor, **genes), q, 0.1, "new:x"), anchor=anchor)  # type: ignore[arg-type]

    rows = [rec(0, BASELINE, 0.8, 1.0, "baseline"), rec(1, anchor, 0.70, 0.1, "front"),
            tried(2, 0.75, tools={"cd": 1}), tried(3, 0.72, tools={"mv": 2}), tried(4, 0.60, tools={"ls": 1}),
            tried(5, 0.74, tools={"cd": 2}),  # the same slot as a bigger gain: left out
            tried(6, 0.71, sections={"policy": 3})]
    [combined] = accumulated(rows, "pass_rate")
    assert combined == Genome(model=1, steps={"verify": True}, tools={"cd": 1, "mv": 2}, sections={"policy": 3})
    assert accumulated(rows[:3], "pass_rate") == []  # one improving entry is its own trial already
    assert accumulated([r for r in rows if r.number != 1], "pass_rate") == []  # the anchor itself unmeasured


def test_the_cheap_anchor_is_judged_against_the_baselines_own_result() -> None:
    from evoharness.search.optimise.seeding import anchors

    best = rec(1, Genome(steps={"verify": True}), 0.9, 1.4)
    medium = rec(2, Genome(model=2, steps={"verify": True}), 0.8, 0.4)
    small = rec(3, Genome(model=1), 0.4, 0.04)
    # the baseline (0.775) is not on this front: without its result every member looked "within the margin"
    assert anchors([best, medium, small], "pass_rate", margin=0.05) == [best.genome, small.genome]
    assert anchors([best, medium, small], "pass_rate", margin=0.05, reference=0.775) == [best.genome, medium.genome]


def test_combining_compares_genomes_recorded_under_different_pools() -> None:
    """The anchor was recorded in an earlier round, before any tool had an edit; this round's
    records spell the same genome with every tool at 0. They are one genome."""
    from evoharness.search.genome import canonical
    from evoharness.search.optimise.seeding import accumulated

    anchor = Genome(model=1, steps={"verify": True}, tool_format="json")
    spelled = Genome(model=1, steps={"verify": True}, tool_format="json", tools={"cd": 0, "mv": 0}, sections={"role": 0})

    def tried(n: int, q: float, tools: dict[str, int]) -> TrialRecord:
        return replace(rec(n, replace(spelled, tools={**spelled.tools, **tools}), q, 0.1, "new:x"), anchor=anchor)

    rows = [rec(1, spelled, 0.7, 0.1, "front"), tried(2, 0.75, {"cd": 1}), tried(3, 0.72, {"mv": 1})]
    canon = lambda g: canonical(g, base_format="json", base_steps={"verify": False})  # noqa: E731
    assert accumulated(rows, "pass_rate") == []  # compared as spelled, the anchor is not found
    [combined] = accumulated(rows, "pass_rate", canon=canon)
    assert canon(combined) == Genome(model=1, steps={"verify": True}, tools={"cd": 1, "mv": 1})


def test_the_ablation_peels_the_model_then_the_base_settings_then_the_mutators_edits() -> None:
    from evoharness.search.optimise.ablation import decompose, layers
    from evoharness.search.records.summary import ablation_line as line

    base = initial_pools(AGENT, models=["m"], temperatures=[0.0, 0.7], base_model="base", base_temperature=0.0)
    p = replace(base, tools={"cd": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["r"]}, "rule_miner"))},
                steps={**base.steps, "check": PoolEntry({"name": "check", "instructions": "c"}, "workflow_step_append")})
    champion = Genome(model=1, steps={"verify": True, "check": True}, tools={"cd": 1}, temperature=1)
    out = layers(champion, p, base_format="json", base_steps={"verify": False})
    assert [name for name, _ in out] == ["model", "harness settings", "mutator edits"]
    assert out[1][1] == Genome(model=1, steps={"verify": True}, temperature=1)  # the base config's own step, a pooled temperature
    assert out[2][1] == champion
    # a champion that is the model swap alone has one layer
    assert [name for name, _ in layers(Genome(model=1), p, base_format="json", base_steps={"verify": False})] == ["model"]
    rows = decompose(0.70, [("model", 0.72), ("harness settings", 0.80), ("mutator edits", 0.84)])
    assert [round(r["gain"], 3) for r in rows] == [0.02, 0.08, 0.04]
    assert "the mutators' edits by rule_miner earned 33% of the gain" in line(rows, ["rule_miner"], "pass_rate")
    swap = decompose(0.787, [("model", 0.625), ("mutator edits", 0.812)])  # the model swap alone loses quality
    assert "model -0.162, mutator edits +0.187" in line(swap, ["x"], "pass_rate") and "earned 100% of the gain" in line(swap, [], "q")
    assert "not measured" in line(decompose(0.7, [("model", None), ("mutator edits", 0.8)]), [], "pass_rate")
    # a cost lever earns its keep in the bill: each layer's cost change over the one before, and the harness's in all
    clip = decompose(0.815, [("model", 0.70), ("mutator edits", 0.70)], incumbent_cost=0.108, costs=[0.029, 0.0261])
    assert [round(r["cost_change"], 2) for r in clip] == [-0.73, -0.1]
    text = line(clip, ["context_clip"], "pass_rate")
    assert "model -0.115 (-73% cost/task), mutator edits +0.000 (-10% cost/task)" in text
    assert "gained no quality net (+0.000) and cut the cost per task by 10%" in text and "gain and cost come from" in text
    dearer = decompose(0.7, [("mutator edits", 0.7)], incumbent_cost=0.1, costs=[0.12])
    assert "raised the cost per task by 20%" in line(dearer, [], "pass_rate") and "(+20% cost/task)" in line(dearer, [], "pass_rate")
    # a layer whose cost was not measured: the next layer is not credited with its saving, and no total is claimed
    gap = decompose(0.80, [("model", None), ("harness settings", 0.80), ("mutator edits", 0.79)], incumbent_cost=0.010,
                    costs=[None, 0.005, 0.0049])
    assert [r["cost_change"] for r in gap][:2] == [None, None] and "cut the cost" not in line(gap, [], "pass_rate")
    assert "cost/task" not in line(rows, ["rule_miner"], "pass_rate")  # recorded without costs: as before


def test_with_no_cheap_member_qualifying_yet_the_cheap_anchor_is_the_closest_cheaper_one() -> None:
    """Round 0 without a verify step: no cheaper member is within the margin of the baseline. New
    entries must still be tried on a cheap model (the best cheaper member), or an edit that would
    lift it, such as a verify step, is only ever tried on the dear model."""
    from evoharness.search.optimise.seeding import anchors

    dear = rec(1, Genome(temperature=1), 0.74, 0.10)
    medium = rec(2, Genome(model=2), 0.65, 0.024)
    small = rec(3, Genome(model=1), 0.35, 0.004)
    assert anchors([dear, medium, small], "pass_rate", margin=0.05, reference=0.725, reference_cost=0.093) == [dear.genome,
                                                                                                           medium.genome]


def test_anchors_share_the_room_and_a_shared_proposal_is_tried_on_each(settings: RunSettings) -> None:
    """Anchors take turns for the pools' room (the best-quality anchor first), however many more
    failures the dear anchor's proposals address; each anchor gets a step of the kind its evidence
    calls for; and a step both anchors ask for is one entry, tried on both."""
    first = initial_pools(settings.agent, models=["sim_medium"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    text = first.sections["policy"][0].value
    base = replace(first, sections={**first.sections, "policy": (*first.sections["policy"], PoolEntry(text + "\n- mine", "x"))})
    big = rec(1, Genome(), 0.8, 1.0, "baseline")
    medium = rec(2, Genome(model=1, sections={"policy": 1}), 0.7, 0.2)
    evidence = [*(wrong(f"t/{i}", "mv", "destination", big.genome) for i in range(6)), wrong("t/9", "cd", "folder", medium.genome)]
    rp = mutate(replace(settings, pool_size=3), 1, base, [big, medium], evidence,
                mutators=[(make_mutator("rule_miner", targets="section"), 1.0), (make_mutator("workflow_step_append"), 1.0)],
                run_teacher=None, echo=lambda _: None, reference=(0.75, 1.0))
    policy = [e for e in rp.added if e.kind == "section"]
    assert [e.anchor for e in policy] == [big.genome]  # pool_size 3: room for one new entry; the dear anchor's came first
    steps = [e for e in rp.added if e.kind == "step"]
    arguments = {w for _, w in STEP_KINDS["arguments"].wordings}  # wrong values call for an argument check
    assert [rp.pools.steps[e.key or ""].value["instructions"] in arguments for e in steps] == [True] * 4
    assert {e.model for e in (s.anchor for s in steps) if e} == {0, 1}  # two per anchor, their wordings the anchor's rng's
    # the same step asked for by both anchors: one pool entry, tried on each
    step = {"name": "look_again", "instructions": "Look again.", "optional": True}
    same = FunctionMutator("same_step", lambda ctx, rng: [proposal("step", "look_again", step, "same_step", "test")])
    rp = mutate(replace(settings, pool_size=3), 1, base, [big, medium], evidence, mutators=[(same, 1.0)], run_teacher=None,
                echo=lambda _: None, reference=(0.75, 1.0))
    steps = [e for e in rp.added if e.kind == "step"]
    assert [e.key for e in steps] == ["look_again", "look_again"] and {e.model for e in (s.anchor for s in steps) if e} == {0, 1}


def test_a_genome_on_a_retired_entry_is_never_queued() -> None:
    p, _ = retire_one(slot_pools(3), "section", "role", keep=[2])
    front = [rec(1, Genome(sections={"role": 1}), 0.8, 1.0), rec(2, Genome(sections={"role": 2}), 0.7, 0.5)]
    q = round_queue(1, p, front, [], [], quality="pass_rate", budget=5, base_format="json", base_steps={"verify": False},
                    accumulated=[Genome(sections={"role": 1})])
    assert [x.params.get("section.role") for x in q] == [0, 2]  # the baseline and the live member; entry 1 is retired


def test_a_workflow_step_is_supported_by_every_failed_episode(settings: RunSettings) -> None:
    base = initial_pools(settings.agent, models=["sim_medium"], temperatures=[0.0], base_model="base", base_temperature=0.0)
    big = rec(1, Genome(), 0.8, 1.0, "baseline")
    evidence = [wrong(f"t/{i}", "mv", "destination", big.genome) for i in range(4)] + [wrong("t/9", "cd", "folder", big.genome)]
    rp = mutate(settings, 1, base, [big], evidence, run_teacher=None, echo=lambda _: None,
                mutators=[(make_mutator("tool_rule_add"), 1.0), (make_mutator("workflow_step_append"), 1.0)])
    # steps act on all five, so a step leads; then tool_rule_add's best, before workflow_step_append's second
    assert [(e.kind, e.support) for e in rp.added] == [("step", 5), ("tool", 4), ("step", 5)]
