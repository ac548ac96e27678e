"""Racing proposals against their anchors: the decision rule, the episode accounting, block
evaluations merged into a full one, and a search in process on a known surface (a proposal that
is worse is raced out after its first block, a resume pays nothing again, and the round's
episodes buy more proposals than with racing off)."""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna
import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import aggregate
from evoharness.search.optimise.race import SAVES, is_cheaper, judge, plan
from evoharness.search.optimise.racing import merged
from evoharness.search.optimise.run import SearchRun
from evoharness.search.optimise.settings import RunSettings
from evoharness.search.optimise.study import episode_keys, paid_episodes
from evoharness.search.optimise.trial import TrialResult, TrialSpec
from evoharness.search.records.format import race_text

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

N_TRAIN = 20


def test_cheaper_and_saves_read_the_mean_cost_per_task() -> None:
    assert is_cheaper(0.10, 0.089) and not is_cheaper(0.10, 0.095)
    assert is_cheaper(0.10, 0.095, share=SAVES) and not is_cheaper(0.10, 0.099, share=SAVES)
    assert not is_cheaper(None, 0.05, share=SAVES) and not is_cheaper(0.1, float("nan"), share=SAVES)
    assert not is_cheaper(0.0, 0.0, share=SAVES)  # free on both sides: nothing saved


def test_blocks_grow_to_the_whole_split_and_racing_off_is_one_block() -> None:
    assert plan(40, first_block=10, growth=2.0) == (10, 20, 40)
    assert plan(20, first_block=10, growth=2.0) == (10, 20)
    assert plan(22, first_block=10, growth=2.0) == (10, 22)  # a last block of 2 settles nothing: it joins the one before
    assert plan(40, first_block=10, growth=2.0, enabled=False) == (40,)
    assert plan(8, first_block=10, growth=2.0) == (8,)


def test_the_rule_rejects_clear_losers_early_and_decides_only_on_the_whole_split() -> None:
    tied = [1.0] * 10
    worse = [1.0] * 4 + [0.0] * 6
    # clearly worse on the first block: stopped there
    assert judge(tied, worse, clusters=None, ran=10, of=40, confidence=0.95).decision == "rejected"
    # a clearly worse edit that is much cheaper is a trade-off: never raced out on quality
    assert judge(tied, worse, clusters=None, ran=10, of=40, confidence=0.95, cheaper=True).decision == "continue"
    # no change on a quarter of the split: not evidence of anything yet
    assert judge(tied, tied, clusters=None, ran=10, of=40, confidence=0.95).decision == "continue"
    # no gain once half the split has run: futile
    assert judge([1.0] * 20, [1.0] * 20, clusters=None, ran=20, of=40, confidence=0.95).decision == "rejected"
    one_up = [0.0] + [1.0] * 19
    assert judge(one_up, [1.0] * 20, clusters=None, ran=20, of=40, confidence=0.95).decision == "continue"
    # a tie that saves a little is what a cost lever is for: it runs on; a loss that saves a little does not
    assert judge([1.0] * 20, [1.0] * 20, clusters=None, ran=20, of=40, confidence=0.95, saves=True).decision == "continue"
    one_down = [1.0] * 19 + [0.0]
    assert judge([1.0] * 20, one_down, clusters=None, ran=20, of=40, confidence=0.95, saves=True).decision == "rejected"
    assert judge(tied, worse, clusters=None, ran=10, of=40, confidence=0.95, saves=True).decision == "rejected"  # clearly worse
    # the whole split: accepted only when the paired interval clears 0, never rejected
    a, b = [0.0] * 20 + [1.0] * 20, [1.0] * 40
    step = judge(a, b, clusters=None, ran=40, of=40, confidence=0.95)
    assert step.decision == "accepted" and step.low > 0 and step.tasks == 40
    assert judge(tied, worse, clusters=None, ran=10, of=10, confidence=0.95).decision == "undecided"
    # clusters are the unit: four tasks of one cluster are one piece of evidence
    clustered = judge([0.0] * 8, [1.0] * 4 + [0.0] * 4, clusters=["a"] * 4 + ["b"] * 4, ran=8, of=8, confidence=0.95)
    assert clustered.clusters == 2 and clustered.decision == "undecided"


def _trial(study: optuna.Study, state: optuna.trial.TrialState, episodes: dict[str, int]) -> None:
    values = [0.5, 0.1, 1.0] if state == optuna.trial.TrialState.COMPLETE else None
    study.add_trial(optuna.trial.create_trial(state=state, values=values, user_attrs={"episodes": episodes}))


def test_episodes_are_counted_once_and_a_raced_proposal_costs_its_blocks() -> None:
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"])
    _trial(study, optuna.trial.TrialState.COMPLETE, {"full-a": 40})  # an ordinary evaluation
    _trial(study, optuna.trial.TrialState.PRUNED, {"b-0": 10, "b-1": 10})  # raced out after two blocks
    _trial(study, optuna.trial.TrialState.COMPLETE, {"c-0": 10, "c-1": 10, "c-2": 20, "full-c": 0})  # raced to the end
    _trial(study, optuna.trial.TrialState.COMPLETE, {"full-c": 40})  # the merged evaluation read again: free
    _trial(study, optuna.trial.TrialState.COMPLETE, {"full-a": 40})  # a repeat: free
    _trial(study, optuna.trial.TrialState.FAIL, {"failed:r0-t5": 40})
    assert episode_keys(study)["full-c"] == 0
    assert paid_episodes(study) == 40 + 20 + 40 + 40
    assert paid_episodes(study, {"full-a", "b-0", "b-1"}) == 40 + 40  # what earlier rounds paid for is free


def _episode(task: str, sample: int, passed: bool) -> EpisodeResult:
    return EpisodeResult(task_id=task, sample=sample, status="scored", passed=passed, score=float(passed), named={}, delivered=True,
                         safety_violations=0, cost_usd=0.01, latency_s=1.0, prompt_tokens=10, completion_tokens=5, model_calls=1,
                         tool_calls=1, tool_errors=0, detail="")


def test_blocks_merge_into_the_evaluation_of_their_tasks_with_skipped_repeats_standing_in() -> None:
    from evoharness.compiler.variant import HarnessVariant

    variant = HarnessVariant.__new__(HarnessVariant)
    first = [_episode(f"t{i}", s, i % 2 == 0) for i in range(4) for s in range(2)] + [_episode("t4", 0, True)]
    second = [_episode(f"t{i}", 0, i % 3 == 0) for i in range(5, 10)]
    stand_first, stand_second = [_episode("t4", 1, True)], [_episode(f"t{i}", 1, i % 3 == 0) for i in range(5, 10)]
    reports = [aggregate(first, variant_hash="v", split="train", samples=2, stand_ins=stand_first),
               aggregate(second, variant_hash="v", split="train", samples=2, stand_ins=stand_second)]
    chunks = [TrialResult(label=f"b{j}", split="train", variant=variant, report=r) for j, r in enumerate(reports)]
    whole = aggregate(first + second, variant_hash="v", split="train", samples=2, stand_ins=stand_first + stand_second)
    out = merged(chunks, "r1-t3")
    assert out.label == "r1-t3" and out.report.metrics == whole.metrics and out.report.tasks == whole.tasks
    assert out.report.metrics["samples_skipped"] == 6 and out.report.metrics["episodes"] == 14


# -- a search in process, on a known surface ------------------------------------------------------

OVERRIDES = [
    "search.rounds=2", "search.trials_per_round=3", "search.population_size=2", f"search.train_limit={N_TRAIN}", "search.samples=1",
    "model=sim_small", "criteria.decision=best_quality", "search.teacher=null", "search.models=[sim_large]", "search.formats=[json]",
    "search.temperatures=[0.0]", "search.resamples=200", "search.max_front_dev=1",
    "mutators.enabled=[{name: prompt_prefix}, {name: prompt_suffix}, {name: tool_description_append}, {name: tool_rule_add}]",
]


def make_settings(tmp: Path, *extra: str) -> RunSettings:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp}", *OVERRIDES, *extra])
    GlobalHydra.instance().clear()
    return RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


class Surface:
    """Every edit of the prompt or the tools passes only the first four tasks of a split; the
    baseline passes the first ten, the large model the first twelve at ten times the price."""

    def __init__(self) -> None:
        self.jobs: list[TrialSpec] = []
        self.order: dict[str, int] = {}

    def __call__(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        out: list[TrialResult | BaseException] = []
        for spec in specs:
            self.jobs.append(spec)
            variant = spec.variant()
            edited = any(spec.genome.sections.values()) or any(spec.genome.tools.values())
            big = spec.genome.model == 1
            episodes = []
            for task_id in spec.task_ids:
                i = self.order.setdefault(task_id, len(self.order)) if spec.split == "train" else int(task_id.rsplit("_", 1)[-1]) % 7
                passed = i < (4 if edited else 12 if big else 10)
                episodes.append(EpisodeResult(task_id=task_id, sample=0, status="scored", passed=passed, score=float(passed), named={},
                                              delivered=True, safety_violations=0, cost_usd=0.01 if big else 0.001, latency_s=1.0,
                                              prompt_tokens=10, completion_tokens=5, model_calls=1, tool_calls=1, tool_errors=0,
                                              detail="" if passed else "wrong value"))
            out.append(TrialResult(label=spec.label, split=spec.split, variant=variant,
                                   report=aggregate(episodes, variant_hash=variant.content_hash, split=spec.split, samples=1)))
        return out


@pytest.fixture()
def raced(tmp_path: Path) -> Iterator[tuple[RunSettings, Surface, list[str]]]:
    settings = make_settings(tmp_path / "on")
    surface = Surface()
    lines: list[str] = []
    SearchRun(settings, launch=surface, echo=lines.append).execute()
    yield settings, surface, lines


def _round(settings: RunSettings, k: int) -> optuna.Study:
    return optuna.load_study(study_name=f"bfcl_agent/r{k}", storage=f"sqlite:///{settings.runs_dir / 'bfcl_agent' / 'study.db'}")


def _proposals(settings: RunSettings) -> list[optuna.trial.FrozenTrial]:
    return [t for t in _round(settings, 1).trials if str(t.user_attrs.get("origin", "")).startswith("new:") and t.state.is_finished()]


def test_a_worse_proposal_is_raced_out_after_its_first_block_and_a_resume_pays_nothing_again(
        raced: tuple[RunSettings, Surface, list[str]]) -> None:
    settings, surface, lines = raced
    proposals = _proposals(settings)
    pruned = [t for t in proposals if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "no proposal was raced out"
    for t in pruned:
        race = t.user_attrs["race"]
        assert race["decision"] == "rejected" and race["tasks"] == 10 < race["of"] == N_TRAIN and race["high"] < 0
        assert sum(t.user_attrs["episodes"].values()) == 10 and t.values is None
        jobs = [j for j in surface.jobs if j.label.startswith(f"r1-t{t.number}-")]
        assert [len(j.task_ids) for j in jobs] == [10]
    # the round's budget is episodes: three full evaluations' worth, the raced blocks included
    assert paid_episodes(_round(settings, 1), _earlier(settings)) <= 3 * N_TRAIN
    assert len(proposals) > 3, "racing bought no more proposals than full evaluations would"
    line = next(x for x in lines if x.startswith("round 1:"))
    assert f"of {3 * N_TRAIN} paid episodes" in line and f"{len(pruned)} rejected ({len(pruned)} early)" in line
    assert f"rejected after 10 of {N_TRAIN} tasks, paired difference -0.600" in line
    # a resume launches nothing: every block and every full evaluation is read back from the store
    before = len(surface.jobs)
    SearchRun(settings, launch=surface, echo=lambda _: None).execute()
    assert len(surface.jobs) == before
    summary_trials = json.loads((settings.runs_dir / "bfcl_agent" / "summary.json").read_text())["trials"]
    assert sum(1 for t in summary_trials if (t.get("race") or {}).get("decision") == "rejected") == len(pruned)


def _earlier(settings: RunSettings) -> set[str]:
    from evoharness.search.optimise.study import eval_keys

    r0 = _round(settings, 0)
    return eval_keys(r0) | set(episode_keys(r0))


def test_with_racing_off_every_proposal_is_evaluated_in_full_and_fewer_fit(tmp_path: Path,
                                                                            raced: tuple[RunSettings, Surface, list[str]]) -> None:
    settings = make_settings(tmp_path / "off", "search.race.enabled=false")
    surface = Surface()
    SearchRun(settings, launch=surface, echo=lambda _: None).execute()
    proposals = _proposals(settings)
    assert proposals and all(t.state == optuna.trial.TrialState.COMPLETE for t in proposals)
    assert all(t.user_attrs["race"]["tasks"] == N_TRAIN and t.user_attrs["race"]["decision"] in ("undecided", "accepted")
               for t in proposals)
    assert len(proposals) <= 3 < len(_proposals(raced[0]))


def test_race_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="search.race.first_block"):
        make_settings(tmp_path, "search.race.first_block=4")
    with pytest.raises(ConfigError, match="search.race.growth"):
        make_settings(tmp_path, "search.race.growth=1.0")
    with pytest.raises(ConfigError, match="search.race.max_tasks: must be at least 1 or null, got 0"):
        make_settings(tmp_path, "search.race.max_tasks=0")


# -- a proposal ahead of its anchor runs on, beyond the search's train tasks ---------------------

def test_extension_blocks_grow_past_the_search_split_up_to_max_tasks() -> None:
    from evoharness.search.optimise.race import estimate, extension

    assert extension(40, 200, growth=2.0, max_tasks=120) == (40, 80)
    assert extension(40, 200, growth=2.0, max_tasks=None) == (40, 120, 200)
    assert extension(40, 41, growth=2.0, max_tasks=None) == (41,)  # a last block of one task joins the one before
    assert extension(40, 200, growth=2.0, max_tasks=40) == extension(40, 0, growth=2.0, max_tasks=None) == ()
    assert extension(40, 200, growth=2.0, max_tasks=120, enabled=False) == ()
    # the estimate is the anchor's quality plus the mean paired difference: its own quality when the tasks are the same
    assert estimate(0.5, [1, 0, 1, 0], [1, 1, 1, 0]) == pytest.approx(0.75)
    assert estimate(0.5, [1, 0, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0]) == pytest.approx(0.5 - 1 / 6)


class Reserve(Surface):
    """On the search's 20 train tasks every edit passes the first twelve, the baseline ten: an edit
    looks ahead. Beyond them (the reserve the race extends into) the baseline passes every other
    task, a prompt edit none (it was lucky on the 20) and a tool edit all (it is better)."""

    def __call__(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        out: list[TrialResult | BaseException] = []
        for spec in specs:
            self.jobs.append(spec)
            variant = spec.variant()
            section, tool = any(spec.genome.sections.values()), any(spec.genome.tools.values())
            episodes = []
            for task_id in spec.task_ids:
                i = self.order.setdefault(task_id, len(self.order)) if spec.split == "train" else int(task_id.rsplit("_", 1)[-1]) % 7
                if i < N_TRAIN:
                    passed = i < (12 if section or tool or spec.genome.model == 1 else 10)
                else:
                    passed = tool or (not section and i % 2 == 0)
                episodes.append(EpisodeResult(task_id=task_id, sample=0, status="scored", passed=passed, score=float(passed), named={},
                                              delivered=True, safety_violations=0, cost_usd=0.001, latency_s=1.0, prompt_tokens=10,
                                              completion_tokens=5, model_calls=1, tool_calls=1, tool_errors=0,
                                              detail="" if passed else "wrong value"))
            out.append(TrialResult(label=spec.label, split=spec.split, variant=variant,
                                   report=aggregate(episodes, variant_hash=variant.content_hash, split=spec.split, samples=1)))
        return out


def test_a_proposal_ahead_on_the_train_tasks_is_measured_on_more_and_ranked_by_all_of_them(tmp_path: Path) -> None:
    from evoharness.search.optimise.study import TrialRecord

    settings = make_settings(tmp_path, "search.rounds=4", "search.race.max_tasks=60", "search.models=[]", "search.trials_per_round=20")
    surface = Reserve()
    lines: list[str] = []
    SearchRun(settings, launch=surface, echo=lines.append).execute()
    extended = [t for k in (1, 2, 3) for t in _round(settings, k).trials
                if t.state == optuna.trial.TrialState.COMPLETE and (t.user_attrs.get("race") or {}).get("extended")]
    lucky = [t for t in extended if any(Genome_of(t).sections.values())]
    better = [t for t in extended if any(Genome_of(t).tools.values()) and not any(Genome_of(t).sections.values())]
    assert lucky and better, [t.user_attrs.get("origin") for t in extended]
    for t in lucky:  # ahead by 2 of 20, behind by 10 of the next 20: stopped there, ranked below its raw 0.6
        race = t.user_attrs["race"]
        assert race["extended"] == N_TRAIN and race["tasks"] == 2 * N_TRAIN < race["of"] == 60 and race["decision"] == "rejected"
        assert t.user_attrs["train"]["pass_rate"] == pytest.approx(0.6)
        assert race["estimate"] == pytest.approx(0.5 + (2 - 10) / 40) and t.values[0] == pytest.approx(race["estimate"])
        assert TrialRecord.of(t, 1).quality("pass_rate") == pytest.approx(race["estimate"])
    for t in better:  # ahead on every reserve task too: accepted on all 60, ranked above its raw 0.6
        race = t.user_attrs["race"]
        assert race["extended"] == 40 and race["tasks"] == 60 and race["decision"] == "accepted"
        assert t.values[0] == pytest.approx(0.5 + (2 + 20) / 60) and t.values[0] > t.user_attrs["train"]["pass_rate"]
    # the anchor's reserve blocks are evaluated once for every proposal on it, and paid once
    anchor_jobs = [(j.genome, j.task_ids) for j in surface.jobs if j.label.startswith("anchor-x")]
    assert anchor_jobs and len(anchor_jobs) == len({(json.dumps(g.to_dict(), sort_keys=True), ids) for g, ids in anchor_jobs})
    assert any("measured beyond the train tasks" in x and "ranked at quality" in x for x in lines)
    # a later trial reading an extended proposal's evaluation is ranked by the same estimate
    keys = {t.user_attrs["eval_key"]: t.user_attrs["race"]["estimate"] for t in extended}
    reread = [t for k in (2, 3) for t in _round(settings, k).trials
              if t.user_attrs.get("eval_key") in keys and not t.user_attrs.get("race")]
    assert reread and all(t.values[0] == pytest.approx(keys[t.user_attrs["eval_key"]]) for t in reread)
    # and a resume pays for nothing again
    before = len(surface.jobs)
    SearchRun(settings, launch=surface, echo=lambda _: None).execute()
    assert len(surface.jobs) == before


def Genome_of(t: optuna.trial.FrozenTrial) -> Any:
    from evoharness.search.genome import Genome

    return Genome.from_dict(t.user_attrs["genome"])



def test_an_extension_stops_where_the_rounds_episodes_run_out_and_says_so(tmp_path: Path) -> None:
    # 10 full evaluations' worth a round: four proposals ahead of their anchor on the 20 train tasks
    # would extend by 40 more each (their anchor's 40 paid once), more than the round has left
    settings = make_settings(tmp_path, "search.rounds=2", "search.race.max_tasks=60", "search.models=[]", "search.trials_per_round=10")
    SearchRun(settings, launch=Reserve(), echo=lambda _: None).execute()
    budget = 10 * N_TRAIN
    assert paid_episodes(_round(settings, 1), _earlier(settings)) <= budget
    races = [t.user_attrs["race"] for t in _round(settings, 1).trials if t.user_attrs.get("race")]
    stopped = [r for r in races if r.get("stopped")]
    assert stopped and all(r["stopped"] == "round budget" and r["decision"] == "undecided" and r["tasks"] < r["of"] == 60 for r in stopped)
    assert any(r["extended"] for r in races)  # the extensions that fitted ran
    assert "its extension stopped where the round's episodes ran out" in race_text(stopped[0])


def test_an_extension_does_not_start_past_the_spend_cap(tmp_path: Path) -> None:
    # a round budget that would buy every extension, and a cap that leaves room for the first
    # blocks and the finish's reserve but not for every extension
    settings = make_settings(tmp_path, "search.rounds=2", "search.race.max_tasks=60", "search.models=[]", "search.trials_per_round=20",
                             "+search.budget_usd=1.5")
    SearchRun(settings, launch=Reserve(), echo=lambda _: None).execute()
    rows = [json.loads(line) for line in (settings.runs_dir / "bfcl_agent" / "spend.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum(float(r["cost_usd"]) for r in rows) <= 1.5
    races = [t.user_attrs["race"] for t in _round(settings, 1).trials if t.user_attrs.get("race")]
    assert any(r.get("stopped") == "spend cap" and r["decision"] == "undecided" for r in races)
    assert "its extension stopped at search.budget_usd" in race_text(next(r for r in races if r.get("stopped")))
