"""Integration: the simulator on the real BFCL workload, loop and scorer."""
from __future__ import annotations

import asyncio
import dataclasses

import pytest

pytest.importorskip("evoharness.compiler.workloads.bfcl.workload")

from evoharness.compiler.sim.faults import configure_sim, reset_sim  # noqa: E402
from evoharness.compiler.sim.gold import WorkloadGoldSource  # noqa: E402
from evoharness.compiler.sim.tiers import TIERS  # noqa: E402

AGENT = {
    "name": "bfcl_sim_test", "tool_format": "json", "tools": ["*"], "max_turns": 12,
    "prompt_sections": {"role": "Complete the user's requests with the tools.", "style": "Be concise."},
    "workflow": [{"name": "act", "instructions": "Call the tools in order."},
                 {"name": "verify", "instructions": "Verify each result.", "after": ["act"], "trigger": "before_final"}],
}
TASKS = ("bfcl/multi_turn_base_0", "bfcl/multi_turn_base_1", "bfcl/multi_turn_base_2")


def test_gold_source_reads_bfcl():
    gold = WorkloadGoldSource()
    task = gold.task(TASKS[0])
    assert task.gold[0] and all(isinstance(c.arguments, dict) for c in task.gold[0])
    specs = gold.tool_specs(TASKS[0])
    assert specs["mv"].mutates_state and not specs["ls"].mutates_state and specs["ls"].group


def test_error_free_tier_passes_bfcl_through_the_real_loop(monkeypatch):
    from evoharness.compiler.runtime.loop import run_episode
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload

    perfect = dataclasses.replace(TIERS["large"], wrong_tool=0, wrong_value=0, propagation=0, malformed=0,
                                  skip_read=0, premature_stop=0)
    monkeypatch.setitem(TIERS, "large", perfect)
    reset_sim()
    configure_sim(None, time_scale=0.0)
    variant = compile_agent(AGENT, tool={"source": "bfcl", "definitions": {}, "overrides": {}},
                            model={"route": "sim/large", "temperature": 0.0, "send_episode_id": True})
    workload = BfclWorkload()
    try:
        for task_id in TASKS:
            task = workload.task(task_id)
            env = workload.make_environment(task, seed=0)
            trajectory = asyncio.run(run_episode(variant, task, env, sample=0, seed=0))
            assert trajectory.status == "completed", trajectory.infra_error
            assert workload.score(task, trajectory, env).passed, task_id
            assert trajectory.cost_usd > 0 and trajectory.prompt_tokens > 0
    finally:
        reset_sim()
