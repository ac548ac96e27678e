"""search.budget_usd: no new paid work past the cap, the finish reserved, the spend journaled."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.optimise.budget import Estimate, estimate, may_start, projection
from evoharness.search.optimise.finish import FinishAborted
from evoharness.search.optimise.run import SearchRun
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.records.spend import read_spend
from tests.search.optimise.test_run import OVERRIDES, Launcher

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)


@pytest.fixture()
def make(tmp_path: Path) -> Iterator[Callable[[str, float | None], RunSettings]]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()

    def build(name: str, cap: float | None) -> RunSettings:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path / name}", *OVERRIDES, "search.rounds=3",
                                                                  "search.train_limit=60"])
        st = RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])
        return replace(st, search=replace(st.search, budget_usd=cap))

    yield build
    GlobalHydra.instance().clear()


def test_estimates_err_high_and_reserve_the_finish() -> None:
    rows = [{"split": "train", "cost_usd": 0.3}, {"split": "train", "cost_usd": 0.9}, {"split": "mutator", "cost_usd": 5.0}]
    tasks = {"train": 3, "dev": 10, "holdout": 20}
    est = estimate(rows, front_costs=[0.01, 0.2, 0.05], baseline_cost=0.02, tasks=tasks, dev_members=2, references=1, extra_dev=0)
    # dev: the baseline and the two dearest members; holdout: the dearest (a bound on the champion) and the baseline
    assert est == Estimate(per_train_eval=0.9, finish=pytest.approx((0.02 + 0.2 + 0.05) * 10 + (0.2 + 0.02) * 20))
    named = estimate(rows, front_costs=[0.01, 0.2, 0.05], baseline_cost=0.02, tasks=tasks, dev_members=2, references=2, extra_dev=0)
    assert named is not None and named.finish == pytest.approx(est.finish + 0.2 * (10 + 20))
    # two samples per task cost twice; the ablation's two dev runs are reserved at the dearest cost
    both = estimate(rows, front_costs=[0.01, 0.2, 0.05], baseline_cost=0.02, tasks=tasks, dev_members=2, references=1, samples=2)
    assert both is not None and both.finish == pytest.approx(2 * (est.finish + 2 * 0.2 * 10))
    assert estimate([{"split": "dev", "cost_usd": 1.0}], front_costs=[], baseline_cost=0.0, tasks=tasks, dev_members=1,
                    references=1) is None
    assert may_start(None, spent_usd=1e9, batch=5, est=est) and may_start(100.0, spent_usd=50.0, batch=5, est=None)
    assert may_start(13.0, spent_usd=2.0, batch=4, est=est) and not may_start(13.0, spent_usd=3.0, batch=4, est=est)
    assert projection(0.01, tasks=tasks, rounds=2, per_round=10, dev_members=2, references=1, samples=2) == pytest.approx(
        2 * 0.01 * (2 * 10 * 3 + 3 * 10 + 2 * 20))


def test_a_capped_search_stops_new_trials_and_still_decides(make: Callable[[str, float | None], RunSettings]) -> None:
    lines: list[str] = []
    full = SearchRun(make("full", None), launch=Launcher(), echo=lines.append).execute()
    assert full["spend"]["capped_in_round"] is None and full["spend"]["spent_usd"] > 0
    assert any(line.startswith("projected spend: at most about $") for line in lines)
    cap = 0.75 * full["spend"]["spent_usd"]
    lines.clear()
    launcher = Launcher()
    capped = SearchRun(make("capped", cap), launch=launcher, echo=lines.append).execute()
    assert capped["spend"]["spent_usd"] <= cap and capped["spend"]["capped_in_round"] is not None
    journal = Path(capped["paths"]["ledger"]).parent / "spend.jsonl"
    assert capped["spend"]["spent_usd"] == pytest.approx(sum(r["cost_usd"] for r in read_spend(journal)))
    assert len(capped["trials"]) < len(full["trials"])
    assert capped["champion"] and capped["claim"]["verdict"]  # it finished with what it measured
    assert any(f"search.budget_usd={cap:g} reached" in line for line in lines)
    assert [j.split for j in launcher.jobs].count("holdout") == 2


def test_a_cap_below_the_finish_stops_with_one_line(make: Callable[[str, float | None], RunSettings]) -> None:
    with pytest.raises(FinishAborted, match=r"search.budget_usd=0.001 leaves too little for the dev and holdout runs .* raise "):
        SearchRun(make("tiny", 0.001), launch=Launcher(), echo=lambda _: None).execute()


def test_the_progress_line_reads_the_round(tmp_path: Path) -> None:
    import optuna

    from evoharness.search.optimise.progress import study_progress

    study = optuna.create_study(directions=["maximize"])
    for q, cost in ((0.8, 0.10), (0.7, 0.02), (0.5, 0.001)):
        study.add_trial(optuna.trial.create_trial(value=q, user_attrs={"train": {"pass_rate": q, "cost_per_task": cost, "episodes": 40}}))
    line = study_progress(study, "pass_rate", 1.5, 0.65)
    assert line == "120 episodes, $1.50 spent, best pass_rate 0.800, cheapest qualifying $0.0200/task"
    assert "qualifying" not in study_progress(study, "pass_rate", 0.0, None)


def test_the_forecast_comes_before_the_baseline_and_the_baseline_counts(make: Callable[[str, float | None], RunSettings]) -> None:
    launcher = Launcher()
    at: list[tuple[int, str]] = []  # (jobs launched so far, line)
    settings = make("counted", 50.0)
    summary = SearchRun(settings, launch=launcher, echo=lambda line: at.append((len(launcher.jobs), line))).execute()
    [(launched, line)] = [(n, text) for n, text in at if text.startswith("projected spend before the baseline")]
    assert launched == 0 and "the baseline about $" in line and "search.budget_usd=50 caps it" in line
    study = Path(summary["paths"]["ledger"]).parent
    rows = read_spend(study / "spend.jsonl")
    baseline = [r for r in rows if r["split"] == "train" and r["label"] == launcher.jobs[0].label]
    assert launcher.jobs[0].split == "train" and len(baseline) == 1 and baseline[0]["cost_usd"] > 0
    on_record = json.loads((study / "summary.json").read_text(encoding="utf-8"))["spend"]
    assert on_record["budget_usd"] == 50.0 and on_record["spent_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert on_record["spent_usd"] >= baseline[0]["cost_usd"] + sum(r["cost_usd"] for r in rows if r["split"] != "train")
    # resumed (a round that ran out of new genomes asks again): no evaluation is paid for, or counted, twice
    resumed = SearchRun(make("counted", 50.0), launch=Launcher(), echo=lambda _: None).execute()
    after = read_spend(study / "spend.jsonl")
    assert after[:len(rows)] == rows and len({r["eval_key"] for r in after}) == len(after)
    assert resumed["spend"]["spent_usd"] == pytest.approx(sum(r["cost_usd"] for r in after))


def test_the_forecast_is_a_floor_of_what_the_baseline_costs(make: Callable[[str, float | None], RunSettings]) -> None:
    """On the simulator, the baseline evaluated for real: the forecast is below what it cost, and not
    by orders of magnitude (it leaves out only what the tools answer)."""
    from evoharness.compiler.variant import compile_agent
    from evoharness.search.evaluation.evaluate import evaluate_variant
    from evoharness.search.optimise.forecast import forecast
    from evoharness.search.optimise.freeze import Splits

    settings = make("floor", None)
    settings = replace(settings, search=replace(settings.search, train_limit=6))
    splits = Splits.of(settings)
    f = forecast(settings, splits)
    variant = compile_agent(settings.agent, tool=settings.tool, model=settings.models["base"])
    tasks = [splits.workload.task(t) for t in splits.task_ids["train"]]
    real = evaluate_variant(variant, splits.workload, "train", samples=1, concurrency=6, seed=0, tasks=tasks, cache=None)
    measured = real.metrics["cost_per_task"]
    assert f is not None and 0.2 * measured < f.per_task < measured
    calls = sum(e.model_calls for e in real.episodes) / len(tasks)
    assert 0.5 * calls < f.calls / len(tasks) < 2 * calls


def test_the_forecast_says_when_it_leaves_escalated_calls_out() -> None:
    from types import SimpleNamespace

    from evoharness.search.optimise.forecast import Forecast, forecast_line

    settings: Any = SimpleNamespace(search=SimpleNamespace(samples=2, budget_usd=None))
    f = Forecast(per_task=0.01, calls=10, baseline=0.8, finish=2.0, search=9.0)
    assert "(prices x the rendered prompt's tokens x the reference solutions' calls, tool results left out" in forecast_line(
        f, settings, 40)
    assert "tool results and escalated calls left out" in forecast_line(replace(f, escalates=True), settings, 40)
