"""criteria.decision=fastest_noninferior through the rounds and the finish, on a launcher that
answers from a table (no model call): the bash tool format is as good and twice as fast but dearer,
so the fastest rule ships it and claims a latency saving, where the cheapest rule keeps the
incumbent."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.evaluation.metrics import EpisodeResult, aggregate
from evoharness.search.genome import Genome
from evoharness.search.optimise.run import SearchRun
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.optimise.trial import TrialResult, TrialSpec

OVERRIDES = [
    "search.rounds=1", "search.trials_per_round=6", "search.population_size=4", "search.samples=1", "model=sim_small",
    "search.teacher=null", "search.models=[]", "search.formats=[json,bash]", "search.temperatures=[0.0]",
    "mutators.enabled=[{name: identity, params: {count: 1}}]", "search.resamples=200", "criteria.margin=0.05",
]


def table(genome: Genome, task: int) -> tuple[bool, float, float]:
    """Pass, cost and latency of one episode: every variant passes the same tasks; the bash format
    costs twice as much and answers in half the time."""
    bash = genome.tool_format == "bash"
    return task % 3 != 0, 0.002 if bash else 0.001, (0.5 if bash else 1.0) + 0.01 * (task % 7)


def launch(specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
    out: list[TrialResult | BaseException] = []
    for spec in specs:
        variant = spec.variant()
        episodes = []
        for i, task_id in enumerate(spec.task_ids):
            passed, cost, latency = table(spec.genome, i)
            episodes.append(EpisodeResult(task_id=task_id, sample=0, status="scored", passed=passed, score=float(passed), named={},
                                          delivered=True, safety_violations=0, cost_usd=cost, latency_s=latency, prompt_tokens=10,
                                          completion_tokens=5, model_calls=1, tool_calls=1, tool_errors=0, detail=""))
        report = aggregate(episodes, variant_hash=variant.content_hash, split=spec.split, samples=1)
        out.append(TrialResult(label=spec.label, split=spec.split, variant=variant, report=report))
    return out


def search(tmp_path: Path, decision: str) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path / decision}", *OVERRIDES, f"criteria.decision={decision}"])
    GlobalHydra.instance().clear()
    return SearchRun(RunSettings.from_config(cfg, conf_dirs=[CONF_DIR]), launch=launch, echo=lambda _: None).execute()


@pytest.mark.parametrize("decision", ["fastest_noninferior", "cheapest_noninferior"])
def test_the_fastest_rule_ships_the_fast_member_the_cheapest_rule_keeps_the_incumbent(tmp_path: Path, decision: str) -> None:
    summary = search(tmp_path, decision)
    champion, claim = summary["champion"], summary["claim"]
    assert summary["decision"]["rule"] == decision == claim["decision"]
    if decision == "fastest_noninferior":
        assert champion["genome"].get("tool_format") == "bash" and summary["decision"]["evidence"] == "interval"
        assert claim["verdict"] == "win" and claim["latency_saving"] > 0 and "cost_saving" not in claim
        assert summary["headline"].startswith("decision fastest_noninferior (margin 0.05): ship ")
        assert "non-inferior within 0.05 and faster" in summary["headline"]
    else:
        assert champion["variant_hash"] == summary["baseline"]["variant_hash"] and summary["decision"]["evidence"] == "none"
