"""SearchRun in process, on a launcher that answers from a known response surface (no model call):
the round queue reaches the study in priority order, the budget counts distinct evaluations,
controls draw fresh seeds, and the finish compiles nothing the rounds already compiled."""
from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna
import pytest

from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import aggregate
from evoharness.search.genome import Genome, Pools
from evoharness.search.optimise import trial as trial_module
from evoharness.search.optimise.finish import FinishAborted
from evoharness.search.optimise.run import CONTROL_SEED_STRIDE, SearchRun
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.optimise.trial import TrialResult, TrialSpec
from evoharness.search.records.claim_record import NoRecord, read_claim_record, record_claim

OVERRIDES = [
    "search.rounds=2", "search.trials_per_round=10", "search.population_size=4", "search.train_limit=3", "search.samples=1",
    "model=sim_small", "criteria.decision=best_quality",
    "search.teacher=null", "search.models=[sim_large]", "search.formats=[json,bash,both]", "search.temperatures=[0.0]",
    "mutators.enabled=[{name: identity, params: {count: 1}}, {name: prompt_suffix}]", "search.resamples=200",
]


def surface(genome: Genome, task: int) -> tuple[bool, float]:
    """Pass/fail and cost of one episode: the large model passes more and costs ten times as much;
    a prompt edit (any non-baseline section entry) passes one more task; another format or the
    verify step only costs more."""
    big = genome.model == 1
    edited = any(genome.sections.values())
    passed = task < (2 if big else 1) or (edited and task == 2)
    cost = (0.01 if big else 0.001) * (1 if genome.tool_format in (None, "json") else 2) * (1.2 if genome.steps.get("verify") else 1)
    return passed, cost


@pytest.fixture()
def settings(tmp_path: Path) -> Iterator[RunSettings]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", *OVERRIDES])
    GlobalHydra.instance().clear()
    yield RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


def settings_tasks(st: RunSettings) -> list[str]:
    from evoharness.compiler.runtime.workload import workload_factory

    return [t.task_id for t in workload_factory(st.workload.name)(**dict(st.workload.options)).tasks("dev")]


class Launcher:
    def __init__(self) -> None:
        self.jobs: list[TrialSpec] = []
        self.compile = TrialSpec.variant  # the job side compiles, as a real job does

    def __call__(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        out: list[TrialResult | BaseException] = []
        for spec in specs:
            self.jobs.append(spec)
            variant = self.compile(spec)
            episodes = []
            for i, task_id in enumerate(spec.task_ids):
                passed, cost = surface(spec.genome, i)
                episodes.append(EpisodeResult(task_id=task_id, sample=0, status="scored", passed=passed, score=float(passed), named={},
                                              delivered=True, safety_violations=0, cost_usd=cost, latency_s=1.0, prompt_tokens=10,
                                              completion_tokens=5, model_calls=1, tool_calls=1, tool_errors=0, detail=""))
            report = aggregate(episodes, variant_hash=variant.content_hash, split=spec.split, samples=1)
            out.append(TrialResult(label=spec.label, split=spec.split, variant=variant, report=report))
        return out


def test_rounds_dev_and_holdout_on_a_known_surface(settings: RunSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = Launcher()
    compiled_by_orchestrator: list[dict[str, Any]] = []
    original = TrialSpec.variant

    def counting(self: TrialSpec) -> Any:
        compiled_by_orchestrator.append(self.genome.to_dict())
        return original(self)

    monkeypatch.setattr(trial_module.TrialSpec, "variant", counting)
    summary = SearchRun(settings, launch=launcher, echo=lambda _: None).execute()

    storage = f"sqlite:///{settings.runs_dir / 'bfcl_agent' / 'study.db'}"
    r0 = optuna.load_study(study_name="bfcl_agent/r0", storage=storage)
    origins = [t.user_attrs.get("origin", "sampler") for t in r0.trials]
    # the baseline, then one change at a time (the two other formats, the model), then the sampler
    assert origins[:4] == ["baseline", *["one_change"] * 3] and set(origins[4:]) == {"sampler"}
    # the budget counts distinct evaluations; repeats are free, but at most three asks per budget slot
    distinct = len({t.user_attrs["eval_key"] for t in r0.trials if t.state.name == "COMPLETE"})
    assert distinct <= 10 and len(r0.trials) <= 30 and (distinct == 10 or len(r0.trials) == 30)
    r1 = optuna.load_study(study_name="bfcl_agent/r1", storage=storage)
    controls = [t for t in r1.trials if t.user_attrs.get("origin") == "control"]
    assert len(controls) == 1 and controls[0].user_attrs["control"] == "identity"
    control_jobs = [j for j in launcher.jobs if j.label == f"r1-t{controls[0].number}"]
    assert [j.seed for j in control_jobs] == [settings.seed + CONTROL_SEED_STRIDE * 2]
    assert any(t.user_attrs.get("origin", "").startswith("new:prompt_suffix") for t in r1.trials)

    # the edited prompt passes one more task at the small model's price: on the front, and the champion
    # of a quality-first ranking is the large model with that edit
    champion = summary["champion"]
    assert champion["genome"]["model"] == 1 and any(champion["genome"]["sections"].values())
    assert summary["claim"]["verdict"] in ("win", "inconclusive", "no_win", "equivalent") and summary["schema_version"] == 2
    assert json.loads((settings.runs_dir / "bfcl_agent" / "claim.json").read_text())["schema_version"] == 1
    splits = [j.split for j in launcher.jobs]
    assert splits.count("holdout") == 2 and [s for s in splits if s != "dev"][-2:] == ["holdout", "holdout"]
    # where the gain comes from, one layer at a time on dev: the large model passes one more dev task,
    # the prompt edit one more again (and the ablation's own evaluations are dev runs, never holdout)
    rows = {r["layer"]: r for r in summary["ablation"]}
    assert list(rows) == ["model", "mutator edits"]
    n = len(list(settings_tasks(settings)))
    assert rows["model"]["gain"] == pytest.approx(1 / n) and rows["mutator edits"]["gain"] == pytest.approx(1 / n)
    assert [j.label for j in launcher.jobs if j.label.startswith("ablation-")] == ["ablation-model-dev"]
    # nothing is compiled twice by the orchestrator: the rounds, the finish (dev, holdout, snapshots,
    # ledger diffs) and the store's keys share one compiled variant per genome
    keys = [json.dumps(g, sort_keys=True) for g in compiled_by_orchestrator]
    assert keys and len(keys) == len(set(keys))


def test_every_evaluation_is_in_one_dashboard_study_once_with_the_genome_as_params(settings: RunSettings) -> None:
    from evoharness.search.optimise.dashboard import rebuild_view, view_numbers

    summary = SearchRun(settings, launch=Launcher(), echo=lambda _: None).execute()
    storage = f"sqlite:///{settings.runs_dir / 'bfcl_agent' / 'study.db'}"
    rounds = [optuna.load_study(study_name=f"bfcl_agent/r{k}", storage=storage) for k in range(2)]
    view = optuna.load_study(study_name="bfcl_agent/all", storage=storage)
    finished = [(k, t) for k, s in enumerate(rounds) for t in s.trials if t.state.is_finished()]
    held = {(t.user_attrs["round"], t.user_attrs["round_trial"]) for t in view.trials}
    reads = [str(name) for t in view.trials for name in t.user_attrs.get("reads", ())]
    controls = [c for t in view.trials for c in t.user_attrs.get("controls", ())]
    # every finished trial is in the view: as its own trial, as a re-read of the evaluation an earlier
    # one made, or as a control listed (with its values) on the trial of the variant it re-measured
    assert len(held) + len(reads) + len(controls) == len(finished) and reads and controls
    assert ({f"round {k} trial {t.number}" for k, t in finished}
            == {t.user_attrs["label"] for t in view.trials} | set(reads) | {c["label"] for c in controls})
    made = [t.user_attrs.get("eval_key") for _, t in finished if t.state.name == "COMPLETE" and t.user_attrs.get("origin") != "control"]
    assert sum(1 for t in view.trials if t.user_attrs["kind"] == "evaluated") == len(set(made))
    by_label = {f"round {k} trial {t.number}": t for k, t in finished}
    for t in view.trials:
        for c in t.user_attrs.get("controls", ()):
            control = by_label[c["label"]]
            assert control.user_attrs["origin"] == "control" and control.values == c["values"]
            assert control.user_attrs["variant_hash"] == t.user_attrs["variant_hash"]
    assert view.metric_names == ["pass_rate", "cost_per_task", "latency_p95"]
    # the genome as params, labelled, the same slots on every trial: Optuna's own importance reads them
    assert {frozenset(t.params) for t in view.trials if t.params} == {frozenset(view.trials[0].params)}
    assert {t.params["model"] for t in view.trials} == {"base", "sim_large"}  # "base": the base config's own model
    assert any(v.startswith("#1 ") for t in view.trials for k, v in t.params.items() if k.startswith("section."))
    with warnings.catch_warnings():  # Optuna's note that its evaluator takes a low target as good: the minus says so
        warnings.simplefilter("ignore", UserWarning)
        importance = optuna.importance.get_param_importances(view, target=lambda t: -t.values[0])
    assert "model" in importance
    # its best trials are the variants, each once (a re-read or a control is not a second point)
    best = [t.user_attrs["variant_hash"] for t in view.best_trials]
    assert len(set(best)) == len(best) and {m["variant_hash"] for m in summary["front"]} == set(best)
    # the report names each member's trial there, and every round trial has one (a control its variant's)
    numbers = view_numbers(storage, "bfcl_agent")
    assert set(numbers) == {(k, t.number) for k, t in finished}
    for t in view.trials:
        for c in t.user_attrs.get("controls", ()):
            _, r, _, n = c["label"].split()
            assert numbers[(int(r), int(n))] == t.number
    for m in summary["front"]:
        assert view.trials[m["dashboard_trial"]].user_attrs["variant_hash"] == m["variant_hash"]
        assert numbers[(m["round"], m["trial"])] == m["dashboard_trial"]
    # the claim is kept in a study of its own, which no rebuild of the view touches
    claim = read_claim_record(storage, "bfcl_agent")
    assert "evoharness_claim" not in view.user_attrs and claim["verdict"] == summary["claim"]["verdict"]
    before = [(t.params, t.values, t.user_attrs) for t in view.trials]
    pools = Pools.from_dict(json.loads((settings.runs_dir / "bfcl_agent" / "pools" / "r1.json").read_text(encoding="utf-8"))["pools"])

    def rebuild() -> int:
        return rebuild_view(storage, "bfcl_agent", rounds, settings.objectives, pools, base_format=settings.base_format,
                            base_steps=settings.base_steps)

    assert rebuild() == len(before)  # nothing new: the view is left as it is, not deleted and written again
    assert optuna.load_study(study_name="bfcl_agent/all", storage=storage)._study_id == view._study_id
    optuna.delete_study(study_name="bfcl_agent/all", storage=storage)  # as a kill inside a rebuild can leave it
    assert view_numbers(storage, "bfcl_agent") == {} and read_claim_record(storage, "bfcl_agent") == claim
    assert rebuild() == len(before)
    again = optuna.load_study(study_name="bfcl_agent/all", storage=storage)
    assert [(t.params, t.values, t.user_attrs) for t in again.trials] == before


def test_a_claim_an_earlier_version_kept_on_the_view_is_still_read(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(storage=storage, study_name="old/all").set_user_attr("evoharness_claim", {"schema_version": 1, "verdict": "win"})
    assert read_claim_record(storage, "old")["verdict"] == "win"
    record_claim(storage, "old", ["maximize"], {"schema_version": 1, "verdict": "no_win"})  # a new finish: its own study wins
    assert read_claim_record(storage, "old")["verdict"] == "no_win"
    with pytest.raises(NoRecord, match="holds no study 'other'"):
        read_claim_record(storage, "other")


@pytest.mark.parametrize("kind", ["tpe", "random"])
def test_the_configured_sampler_proposes_the_rounds_trials(settings: RunSettings, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """search.sampler reaches every round's study, and a round run by it completes with sampled trials."""
    from dataclasses import replace

    from evoharness.search.optimise import rounds as run_module

    used: list[str] = []
    original = run_module.round_study

    def recording(storage: str, study: str, k: int, objectives: Any, sampler: Any) -> Any:
        used.append(type(sampler).__name__)
        return original(storage, study, k, objectives, sampler)

    monkeypatch.setattr(run_module, "round_study", recording)
    st = replace(settings, search=replace(settings.search, sampler=kind))
    SearchRun(st, launch=Launcher(), echo=lambda _: None).execute()
    assert used == [{"tpe": "TPESampler", "random": "RandomSampler"}[kind]] * 2
    r0 = optuna.load_study(study_name="bfcl_agent/r0", storage=f"sqlite:///{settings.runs_dir / 'bfcl_agent' / 'study.db'}")
    sampled = [t for t in r0.trials if t.user_attrs.get("origin", "sampler") == "sampler" and t.state.name == "COMPLETE"]
    assert sampled  # the sampler, not only the seeding queue, proposed part of round 0


def test_only_the_orchestrator_stores_and_a_stored_or_repeated_evaluation_launches_no_job(settings: RunSettings) -> None:
    from evoharness.search.genome import BASELINE
    from evoharness.search.optimise.mutation import first_pools

    launcher = Launcher()
    run = SearchRun(settings, launch=launcher, echo=lambda _: None)
    run.pools = first_pools(settings)
    other = Genome.from_dict({**BASELINE.to_dict(), "tool_format": "bash"})
    batch = [run.spec(BASELINE, "train", "a"), run.spec(other, "train", "b"), run.spec(BASELINE, "train", "c")]
    first = run.run_jobs(batch)
    assert [j.label for j in launcher.jobs] == ["a", "b"]  # the repeat in the batch is evaluated once
    assert [r.label for r in first] == ["a", "b", "c"] and [r.reused for r in first] == [False, False, True]  # type: ignore[union-attr]
    assert len(list(run.paths.evals.glob("*.json"))) == 2
    again = run.run_jobs(batch)
    assert [j.label for j in launcher.jobs] == ["a", "b"], "a stored evaluation was launched again"
    assert all(r.reused for r in again)  # type: ignore[union-attr]


def test_a_job_that_compiled_another_variant_is_refused(settings: RunSettings) -> None:
    from evoharness.compiler.errors import ConfigError
    from evoharness.search.genome import BASELINE
    from evoharness.search.optimise.mutation import first_pools

    launcher = Launcher()
    launcher.compile = lambda spec: TrialSpec.variant(replace_agent(spec))  # type: ignore[assignment]
    run = SearchRun(settings, launch=launcher, echo=lambda _: None)
    run.pools = first_pools(settings)
    with pytest.raises(ConfigError, match="install the same evoharness revision on every machine"):
        run.run_jobs([run.spec(BASELINE, "train", "a")])
    assert not run.paths.evals.exists() or not list(run.paths.evals.iterdir())
    assert not run.paths.spend.exists()


def replace_agent(spec: TrialSpec) -> TrialSpec:
    """The spec as a worker with another agent template would compile it."""
    from dataclasses import replace

    return replace(spec, agent={**spec.agent, "max_turns": int(spec.agent.get("max_turns", 12)) + 1})


def test_a_jobs_bad_input_stops_the_search_after_the_batchs_finished_results_are_kept(settings: RunSettings) -> None:
    from evoharness.compiler.errors import ConfigError
    from evoharness.search.genome import BASELINE
    from evoharness.search.optimise.mutation import first_pools
    from evoharness.search.optimise.trial import JobInputError
    from evoharness.search.records.spend import read_spend

    good = Launcher()

    def launch(specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        return [*good(specs[:1]), JobInputError(ConfigError("tool", "the snapshot has no reply for this call", "record again"))]

    run = SearchRun(settings, launch=launch, echo=lambda _: None)
    run.pools = first_pools(settings)
    other = Genome.from_dict({**BASELINE.to_dict(), "tool_format": "bash"})
    with pytest.raises(ConfigError, match="^tool: the snapshot has no reply"):
        run.run_jobs([run.spec(BASELINE, "train", "a"), run.spec(other, "train", "b")])
    assert len(list(run.paths.evals.glob("*.json"))) == 1
    assert [r["label"] for r in read_spend(run.paths.spend)] == ["a"]  # the finished one is stored and journaled


def test_the_incumbents_holdout_runs_beside_the_champions_and_a_failed_one_stops_the_claim(settings: RunSettings) -> None:
    """The two holdout runs are one launch; when the incumbent's fails no claim is made, and a
    resume pays only for it: the champion's was stored."""
    class Failing(Launcher):
        def __init__(self, fail: bool) -> None:
            super().__init__()
            self.fail, self.batches = fail, []  # type: bool, list[list[str]]

        def __call__(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
            self.batches.append([s.label for s in specs])
            out = super().__call__(specs)
            return [RuntimeError("node lost") if self.fail and s.label == "baseline-holdout" else r for s, r in zip(specs, out)]

    launcher = Failing(fail=True)
    with pytest.raises(FinishAborted, match="baseline holdout failed: RuntimeError: node lost"):
        SearchRun(settings, launch=launcher, echo=lambda _: None).execute()
    [batch] = [b for b in launcher.batches if "baseline-holdout" in b]
    assert batch[:2] == ["champion-holdout", "baseline-holdout"]  # the longest jobs first, then the ablation's dev runs
    assert not any("holdout" in label for b in launcher.batches if b is not batch for label in b)
    assert not (settings.runs_dir / "bfcl_agent" / "claim.json").exists()
    again = Failing(fail=False)
    summary = SearchRun(settings, launch=again, echo=lambda _: None).execute()
    assert [j.label for j in again.jobs if j.split == "holdout"] == ["baseline-holdout"] and summary["claim"]["looks"] == 1
