"""The finish's stages on tables, with no launcher. Select on dev: each rule ships its own member
(the fastest or the cheapest that is as good). Claim on the holdout: the champion's holdout is the
one job it asks for, the claim is the rule's, the look is journaled once, and a second champion's
look is refused before its holdout is run."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from evoharness.compiler.errors import ConfigError
from evoharness.search.evaluation.metrics import EvalReport, TaskRow
from evoharness.search.genome import BASELINE, Genome, Pools
from evoharness.search.optimise.claim_holdout import claim_on_holdout
from evoharness.search.optimise.select_dev import DevSelection
from evoharness.search.records.looks import read_looks
from evoharness.search.records.outcome import Member

FAST = Genome(tool_format="bash")


def report(name: str, *, latency: float) -> EvalReport:
    passes = [1.0] * 30 + [0.0] * 10
    rows = tuple(TaskRow(f"t{i:02d}", 1, p, p, 0.0, 0.01, latency) for i, p in enumerate(passes))
    return EvalReport(name, "holdout", 1, (), {"pass_rate": 0.75, "cost_per_task": 0.01, "latency_p95": latency}, rows)


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.optimise.settings import RunSettings
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "search.resamples=300",
                                                       "criteria.decision=fastest_noninferior"])
    GlobalHydra.instance().clear()
    return RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


def chosen(champion: Genome, variant: str) -> DevSelection:
    base = report("base", latency=4.0)
    member = Member(trial=1, round=0, variant_hash=variant, genome=champion, dev=None, champion=True)
    return DevSelection(front=[member], champion=member, decision={}, baseline_variant=SimpleNamespace(content_hash="base"),
                        baseline_dev=base, baseline_hold=base, reference_dev=base, reference_hold=base, reference_genome=None)


def variant_of(genome: Genome) -> Any:
    return SimpleNamespace(content_hash="fast" if genome == FAST else "base" if genome == BASELINE else "other")


def test_the_champion_is_claimed_once_under_its_rule_and_a_second_champion_is_refused(settings: Any, tmp_path: Path) -> None:
    jobs: list[Sequence[tuple[Genome, str, str]]] = []

    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        jobs.append(list(batch))
        return [SimpleNamespace(report=report(variant_of(g).content_hash, latency=1.0)) for g, _, _ in batch]

    looks = tmp_path / "looks.jsonl"
    held = claim_on_holdout(settings, looks, {"config": "c"}, chosen(FAST, "fast"), Pools(sections={}), evaluate=evaluate,
                            variant_of=variant_of)
    assert jobs == [[(FAST, "holdout", "champion-holdout")]]  # no dev run to ablate: the holdout alone
    assert held.claim["decision"] == "fastest_noninferior" and held.claim["verdict"] == "win" and held.claim["looks"] == 1
    assert held.claim["latency_saving"] == pytest.approx(3.0) and held.champion_hash == "fast" and held.ablation == []
    again = claim_on_holdout(settings, looks, {"config": "c"}, chosen(FAST, "fast"), Pools(sections={}), evaluate=evaluate,
                             variant_of=variant_of)
    assert again.claim["looks"] == 1 and len(read_looks(looks)) == 1  # the same champion again is the same look
    with pytest.raises(ConfigError, match="second look"):
        claim_on_holdout(settings, looks, {}, chosen(Genome(model=1), "other"), Pools(sections={}), evaluate=evaluate,
                         variant_of=variant_of)
    assert len(jobs) == 2  # refused before the second champion's holdout was run


def test_the_incumbent_as_champion_spends_no_look(settings: Any, tmp_path: Path) -> None:
    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        raise AssertionError(f"nothing to evaluate, asked for {batch}")

    held = claim_on_holdout(settings, tmp_path / "looks.jsonl", {}, chosen(BASELINE, "base"), Pools(sections={}), evaluate=evaluate,
                            variant_of=variant_of)
    assert held.claim["looks"] == 0 and held.champion_hold.variant_hash == "base" and not (tmp_path / "looks.jsonl").exists()


SLOW_CHEAP = Genome(tool_format="both")
TABLE = {"bash": (0.02, 1.0), "both": (0.005, 6.0), None: (0.01, 4.0)}  # tool format -> (cost per task, latency)


def dev_report(genome: Genome, split: str) -> EvalReport:
    cost, latency = TABLE[genome.tool_format]
    passes = [1.0] * 30 + [0.0] * 10
    rows = tuple(TaskRow(f"t{i:02d}", 1, p, p, 0.0, cost, latency) for i, p in enumerate(passes))
    return EvalReport(variant_of(genome).content_hash, split, 1, (),
                      {"pass_rate": 0.75, "cost_per_task": cost, "latency_p95": latency, "tool_failure_rate": 0.0}, rows)


@pytest.mark.parametrize("decision, ships", [("fastest_noninferior", FAST), ("cheapest_noninferior", SLOW_CHEAP)])
def test_the_selection_stage_picks_by_the_rule_on_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decision: str,
                                                        ships: Genome) -> None:
    from dataclasses import replace

    from evoharness.search.evaluation.decision import decision_rule
    from evoharness.search.optimise import select_dev
    from evoharness.search.optimise.select_dev import SearchTrials, select_on_dev
    from evoharness.search.optimise.settings import StudyPaths
    from evoharness.search.optimise.study import TrialRecord

    monkeypatch.setattr(select_dev, "unified_diff", lambda a, b: f"{a.content_hash} -> {b.content_hash}")
    settings = _settings(tmp_path)
    settings = replace(settings, rule=decision_rule(decision, margin=0.05))
    def record(n: int, g: Genome, origin: str) -> TrialRecord:
        cost, latency = TABLE[g.tool_format]
        return TrialRecord(number=n, round=0, state="COMPLETE", genome=g, variant_hash=variant_of(g).content_hash, feasible=True,
                           train={"pass_rate": 0.75, "cost_per_task": cost, "latency_p95": latency}, origin=origin)
    trials = (record(0, BASELINE, "baseline"), record(1, FAST, "sampler"), record(2, SLOW_CHEAP, "sampler"))
    chosen = select_on_dev(settings, StudyPaths.of(settings), SearchTrials((trials,), (trials[1:],), trials[1:]), Pools(sections={}),
                           evaluate=lambda batch: [SimpleNamespace(report=dev_report(g, split)) for g, split, _ in batch],
                           variant_of=variant_of, echo=lambda _: None)
    assert chosen.champion.genome == ships and chosen.champion.champion and chosen.decision["rule"] == decision
    assert [m.champion for m in chosen.front] == [m.genome == ships for m in chosen.front]
    assert all(m.dev_vs_reference and m.dev_vs_reference["n"] == 40 for m in chosen.front)


def _settings(tmp_path: Path) -> Any:
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.optimise.settings import RunSettings
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "search.resamples=300"])
    GlobalHydra.instance().clear()
    return RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])
