"""The finish's stages on tables, with no launcher. Select on dev: each rule ships its own member
(the fastest or the cheapest that is as good). Claim on the holdout: the champion's holdout is the
one job it asks for besides the incumbent's, the claim is the rule's, the look is journaled once (in the study and in the
registry), and a second champion's look is refused before its holdout is run: counted from whatever
is left of the study's journal, the registry's, its stored evaluations and its spend journal, and
from other studies and `evaluate` runs on the same sealed split."""
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
from evoharness.search.optimise.settings import StudyPaths
from evoharness.search.records.looks import Seal, read_looks
from evoharness.search.records.outcome import Member

FAST = Genome(tool_format="bash")


def report(name: str, *, latency: float) -> EvalReport:
    passes = [1.0] * 60 + [0.0] * 20  # 80 tasks: enough to bound a 0.05 margin when all tie
    rows = tuple(TaskRow(f"t{i:02d}", 1, p, p, 0.0, 0.01, latency) for i, p in enumerate(passes))
    return EvalReport(name, "holdout", 1, (), {"pass_rate": 0.75, "cost_per_task": 0.01, "latency_p95": latency}, rows)


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.optimise.settings import RunSettings

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
                        baseline_dev=base, reference_dev=base, reference_genome=None)


def variant_of(genome: Genome) -> Any:
    named = [(FAST, "fast"), (BASELINE, "base"), (Genome(tool_format="json"), "json")]
    return SimpleNamespace(content_hash=next((name for g, name in named if g == genome), "other"))


SEAL = Seal(holdout_hash="h" * 64, splits_hash="s" * 64)


class Store:
    """The finish's evaluate as a search's Evaluations does it: each result stored under
    runs/<study>/evals/ and its spend journaled, from tables instead of a launcher."""

    def __init__(self, paths: StudyPaths) -> None:
        self.paths, self.jobs = paths, []  # type: list[list[tuple[Genome, str, str]]]

    def __call__(self, batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        from evoharness.compiler.atomic import write_json_atomic
        from evoharness.search.optimise.trial import TrialResult
        from evoharness.search.records.spend import append_spend, spend_row

        self.jobs.append(list(batch))
        out = []
        for genome, split, label in batch:
            variant = variant_of(genome)
            latency = 4.0 if variant.content_hash == "base" else 1.0  # the incumbent is the slow one
            res = TrialResult(label=label, split=split, variant=variant, report=report(variant.content_hash, latency=latency))
            write_json_atomic(self.paths.evals / f"{variant.content_hash}-{split}.json", res.to_dict())
            append_spend(self.paths.spend, [spend_row(eval_key=f"{variant.content_hash}-{split}", label=label, split=split,
                                                      variant_hash=variant.content_hash, metrics=res.report.metrics, model_calls=1)])
            out.append(res)
        return out


def claim(settings: Any, champion: Genome, *, study: str | None = None, seal: Seal = SEAL, second_look: bool = False,
          store: Store | None = None) -> Any:
    from dataclasses import replace

    settings = replace(settings, search=replace(settings.search, study=study or settings.search.study, second_look=second_look))
    paths = StudyPaths.of(settings)
    return claim_on_holdout(settings, paths, {"config": "c"}, chosen(champion, variant_of(champion).content_hash),
                            Pools(sections={}), evaluate=store or Store(paths), variant_of=variant_of, seal=seal)


def registry_looks(settings: Any) -> list[dict[str, Any]]:
    return read_looks(Path(settings.registry_dir) / "holdout_looks.jsonl")


def test_the_champion_is_claimed_once_under_its_rule_and_a_second_champion_is_refused(settings: Any) -> None:
    paths = StudyPaths.of(settings)
    store = Store(paths)
    held = claim(settings, FAST, store=store)
    # no dev run to ablate: the two holdout runs alone
    assert store.jobs == [[(FAST, "holdout", "champion-holdout"), (BASELINE, "holdout", "baseline-holdout")]]
    assert held.claim["decision"] == "fastest_noninferior" and held.claim["verdict"] == "win" and held.claim["looks"] == 1
    assert held.claim["second_look"] is False
    assert held.claim["latency_saving"] == pytest.approx(3.0) and held.champion_hash == "fast" and held.ablation == []
    again = claim(settings, FAST, store=store)
    assert again.claim["looks"] == 1 and len(read_looks(paths.looks)) == 1  # the same champion again is the same look
    [look] = registry_looks(settings)  # journaled in the registry too, under the sealed split, once
    assert (look["by"], look["study"], look["variant_hash"], look["splits_hash"], look["holdout_hash"]) == \
        ("search", "bfcl_agent", "fast", SEAL.splits_hash, SEAL.holdout_hash)
    with pytest.raises(ConfigError, match="would be a second look"):
        claim(settings, Genome(model=1), store=store)
    assert len(store.jobs) == 2 and len(registry_looks(settings)) == 1  # refused before the second champion's holdout was run


@pytest.mark.parametrize("deleted", [("holdout_looks.jsonl",), ("holdout_looks.jsonl", "registry"),
                                     ("holdout_looks.jsonl", "registry", "evals"), ("holdout_looks.jsonl", "registry", "spend.jsonl")])
def test_a_deleted_journal_does_not_reset_the_count(settings: Any, deleted: tuple[str, ...]) -> None:
    """The study's journal, then the registry's too, then also one of the study's records of what
    it ran: whatever is left of the evidence still counts the first look."""
    import shutil

    paths = StudyPaths.of(settings)
    assert claim(settings, FAST).claim["looks"] == 1
    for name in deleted:
        target = Path(settings.registry_dir) / "holdout_looks.jsonl" if name == "registry" else paths.dir / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    store = Store(paths)
    with pytest.raises(ConfigError, match=r"already looked at for variant fast \(study 'bfcl_agent'\).*would be a second look"):
        claim(settings, Genome(model=1), store=store)
    assert store.jobs == []  # refused before the holdout ran
    second = claim(settings, Genome(model=1), second_look=True, store=store).claim
    assert (second["looks"], second["second_look"]) == (2, True)
    assert [r["look"] for r in read_looks(paths.looks)] == ([2] if "holdout_looks.jsonl" in deleted else [1, 2])


def test_a_new_study_on_the_same_sealed_split_sees_the_earlier_look(settings: Any) -> None:
    assert claim(settings, FAST, study="first").claim["looks"] == 1
    with pytest.raises(ConfigError, match=r"already looked at for variant fast \(study 'first'\)"):
        claim(settings, Genome(model=1), study="second")
    # the same champion in another study is the same look; a split of its own is a first look
    assert claim(settings, FAST, study="third").claim["looks"] == 1
    assert claim(settings, Genome(model=1), study="fourth", seal=Seal(holdout_hash="o" * 64, splits_hash="p" * 64)).claim["looks"] == 1
    # the sealed split is also known by its holdout's own hash (a search with another train cut has other splits)
    with pytest.raises(ConfigError, match="second look"):
        claim(settings, Genome(model=1), study="fifth", seal=Seal(holdout_hash=SEAL.holdout_hash, splits_hash="q" * 64))
    forced = claim(settings, Genome(model=1), study="sixth", second_look=True).claim
    assert (forced["looks"], forced["second_look"]) == (2, True)
    assert [(r["study"], r["variant_hash"]) for r in registry_looks(settings)] == \
        [("first", "fast"), ("third", "fast"), ("fourth", "other"), ("sixth", "other")]


def test_an_evaluate_look_at_the_split_is_counted_and_the_incumbents_is_not(settings: Any) -> None:
    from evoharness.search.records.looks import RegistryLooks, registry_row

    with RegistryLooks(settings.registry_dir).locked() as looks:  # what `evaluate workload.split=holdout unseal_holdout=true` writes
        looks.append(registry_row(variant_hash="base", by="evaluate", seal=Seal(holdout_hash=SEAL.holdout_hash), tasks=2))
    assert claim(settings, FAST, study="a").claim["looks"] == 1  # the incumbent's run is no look at a candidate
    with RegistryLooks(settings.registry_dir).locked() as looks:
        looks.append(registry_row(variant_hash="other", by="evaluate", seal=Seal(holdout_hash=SEAL.holdout_hash), tasks=2))
    with pytest.raises(ConfigError, match=r"\(study 'a'\) and 1 other variant\(s\)"):
        claim(settings, Genome(tool_format="json"), study="b")
    held = claim(settings, Genome(model=1), study="c").claim  # a variant `evaluate` looked at is claimed as the look it was
    assert (held["looks"], held["second_look"]) == (2, True)


def test_an_evaluate_look_under_other_workload_options_is_counted_by_its_clusters(settings: Any) -> None:
    from evoharness.search.records.looks import RegistryLooks, registry_row

    sealed = Seal(holdout_hash=SEAL.holdout_hash, splits_hash=SEAL.splits_hash, clusters=frozenset({"w/s1", "w/s2", "w/s3"}))
    # `evaluate` with one category, or a per-split limit: another task set, so another holdout hash, on shared scenarios
    part = Seal(holdout_hash="p" * 64, clusters=frozenset({"w/s2"}))
    elsewhere = Seal(holdout_hash="q" * 64, clusters=frozenset({"w/s9"}))
    assert sealed.covers(registry_row(variant_hash="x", by="evaluate", seal=part))
    assert not sealed.covers(registry_row(variant_hash="x", by="evaluate", seal=elsewhere))
    with RegistryLooks(settings.registry_dir).locked() as looks:
        looks.append(registry_row(variant_hash="other", by="evaluate", seal=elsewhere, tasks=1))
    assert claim(settings, FAST, study="a", seal=sealed).claim["looks"] == 1  # a disjoint holdout is no look at this one
    with RegistryLooks(settings.registry_dir).locked() as looks:
        looks.append(registry_row(variant_hash="other", by="evaluate", seal=part, tasks=1))
    with pytest.raises(ConfigError, match=r"1 other variant\(s\)"):
        claim(settings, Genome(tool_format="json"), study="b", seal=sealed)


def test_the_incumbent_as_champion_spends_no_look_and_runs_nothing_on_the_holdout(settings: Any, tmp_path: Path) -> None:
    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        raise AssertionError(f"nothing to evaluate, asked for {batch}")

    held = claim_on_holdout(settings, StudyPaths.of(settings), {}, chosen(BASELINE, "base"), Pools(sections={}), evaluate=evaluate,
                            variant_of=variant_of, seal=SEAL)
    assert held.claim["looks"] == 0 and held.claim["verdict"] == "no_win" and held.claim["n"] == 0 and held.claim["tasks"] == []
    assert held.champion_hold is None and held.baseline_hold is None and held.reference_hold is None
    assert held.claim["baseline_hash"] == held.claim["champion_hash"] == "base"
    assert not StudyPaths.of(settings).looks.exists() and registry_looks(settings) == []


def test_the_champions_holdout_and_the_incumbents_run_as_one_batch(settings: Any) -> None:
    """The incumbent's holdout run is launched together with the champion's; with no candidate
    neither runs, and an earlier look is counted, not a new one."""
    paths = StudyPaths.of(settings)
    store = Store(paths)
    held = claim_on_holdout(settings, paths, {"config": "c"}, chosen(FAST, "fast"), Pools(sections={}), evaluate=store,
                            variant_of=variant_of, seal=SEAL)
    assert store.jobs == [[(FAST, "holdout", "champion-holdout"), (BASELINE, "holdout", "baseline-holdout")]]
    assert (held.claim["baseline_hash"], held.claim["champion_hash"], held.claim["looks"]) == ("base", "fast", 1)
    assert held.baseline_hold is not None and held.reference_hold is not None
    assert held.baseline_hold.variant_hash == held.reference_hold.variant_hash == "base"

    store = Store(paths)
    held = claim_on_holdout(settings, paths, {}, chosen(BASELINE, "base"), Pools(sections={}), evaluate=store, variant_of=variant_of,
                            seal=SEAL)
    assert store.jobs == [] and held.claim["looks"] == 1 and held.champion_hold is None  # the earlier look, not a new one


SLOW_CHEAP = Genome(tool_format="both")
TABLE = {"bash": (0.02, 1.0), "both": (0.005, 6.0), "json": (0.008, 3.0), None: (0.01, 4.0)}  # tool format -> (cost per task, latency)


def dev_report(genome: Genome, split: str) -> EvalReport:
    cost, latency = TABLE[genome.tool_format]
    passes = [1.0] * 60 + [0.0] * 20  # 80 tasks: enough to bound a 0.05 margin when all tie
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
    batches: list[list[tuple[Genome, str, str]]] = []
    lines: list[str] = []

    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        batches.append(list(batch))
        return [SimpleNamespace(report=dev_report(g, split)) for g, split, _ in batch]

    chosen = select_on_dev(settings, StudyPaths.of(settings), SearchTrials((trials,), (trials[1:],), trials[1:]), Pools(sections={}),
                           evaluate=evaluate, variant_of=variant_of, echo=lines.append)
    assert chosen.champion.genome == ships and chosen.champion.champion and chosen.decision["rule"] == decision
    assert [m.champion for m in chosen.front] == [m.genome == ships for m in chosen.front]
    # the best on train (FAST) always has a dev run; the other only when it saves what the rule saves
    ran = [m for m in chosen.front if m.dev]
    assert all(m.dev_vs_reference and m.dev_vs_reference["n"] == 80 for m in ran)
    if decision == "fastest_noninferior":
        assert [m.genome for m in ran] == [FAST]
        assert chosen.front[1].dev_skipped == "not faster than the incumbent on train (6s against 4s)"
        assert lines[0] == "dev runs: 1 of 2 front members; no dev run for 1:" and "not faster than the incumbent" in lines[1]
    else:
        assert len(ran) == 2 and not any(m.dev_skipped for m in chosen.front) and lines == []
    # the dev stage runs nothing on the holdout: the incumbent's run waits for a champion's
    assert all(split == "dev" for _, split, _ in batches[0]) and len(batches) == 1


def test_with_no_dev_member_that_can_win_nothing_runs_on_the_holdout(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.search.optimise import select_dev
    from evoharness.search.optimise.select_dev import SearchTrials, select_on_dev
    from evoharness.search.optimise.study import TrialRecord

    monkeypatch.setattr(select_dev, "unified_diff", lambda a, b: "")
    settings = _settings(tmp_path)  # cheapest_noninferior: only the dear FAST member is on the front
    trials = (TrialRecord(number=0, round=0, state="COMPLETE", genome=BASELINE, variant_hash="base", feasible=True, origin="baseline",
                          train={"pass_rate": 0.75, "cost_per_task": 0.01}),
              TrialRecord(number=1, round=0, state="COMPLETE", genome=FAST, variant_hash="fast", feasible=True,
                          train={"pass_rate": 0.8, "cost_per_task": 0.02}))
    batches: list[list[tuple[Genome, str, str]]] = []

    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        batches.append(list(batch))
        return [SimpleNamespace(report=dev_report(g, split)) for g, split, _ in batch]

    chosen = select_on_dev(settings, StudyPaths.of(settings), SearchTrials((trials,), (trials[1:],), trials[1:]), Pools(sections={}),
                           evaluate=evaluate, variant_of=variant_of, echo=lambda _: None)
    assert [[label for _, _, label in b] for b in batches] == [["baseline-dev", "front-1-dev"]]
    assert chosen.champion.genome == BASELINE


def stored_train(paths: StudyPaths, key: str, genome: Genome, passes: list[float], *, per_cluster: int = 4) -> None:
    from evoharness.compiler.atomic import write_json_atomic
    from evoharness.search.optimise.trial import TrialResult

    variant = variant_of(genome)
    rows = tuple(TaskRow(f"t{i:02d}", 2, p, p, 0.0, 0.01, 1.0, cluster=f"s{i // per_cluster}") for i, p in enumerate(passes))
    report = EvalReport(variant.content_hash, "train", 2, (), {"pass_rate": sum(passes) / len(passes)}, rows)
    write_json_atomic(paths.evals / f"{key}.json", TrialResult(label=key, split="train", variant=variant, report=report).to_dict())


@pytest.mark.parametrize("json_passes, per_cluster, shown", [
    ([1.0, 1.0, 0.0, 1.0] * 10, 4, False),
    ([1.0] * 40, 4, False),  # ahead on every cluster, but 10 clusters cannot bound the difference within 0.05 of it
    ([1.0] * 40, 1, True),  # 40 clusters can
])
def test_a_front_member_that_cannot_reach_the_margin_on_train_gets_no_dev_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_passes: list[float], per_cluster: int, shown: bool) -> None:
    """Judged by the paired train difference against the incumbent's stored train evaluation: the
    cheap member far below the bar is skipped with its reason, though a dev slot is free; the one
    within reach, dearer, is run; the best on train is run although it is not cheaper. Nothing
    runs on the holdout in this stage."""
    from evoharness.search.optimise import select_dev
    from evoharness.search.optimise.select_dev import SearchTrials, select_on_dev
    from evoharness.search.optimise.study import TrialRecord

    monkeypatch.setattr(select_dev, "unified_diff", lambda a, b: "")
    settings = _settings(tmp_path)
    paths = StudyPaths.of(settings)
    paths.evals.mkdir(parents=True, exist_ok=True)
    table = [(BASELINE, "base", [1.0, 1.0, 1.0, 0.0] * 10, 0.01), (FAST, "fast", [1.0] * 40, 0.02),
             (Genome(tool_format="json"), "json", json_passes, 0.008), (SLOW_CHEAP, "both", [1.0, 0.0, 0.0, 0.0] * 10, 0.005)]
    trials = []
    for n, (genome, key, passes, cost) in enumerate(table):
        stored_train(paths, key, genome, passes, per_cluster=per_cluster)
        trials.append(TrialRecord(number=n, round=0, state="COMPLETE", genome=genome, variant_hash=variant_of(genome).content_hash,
                                  feasible=True, origin="baseline" if n == 0 else "sampler", eval_key=key,
                                  train={"pass_rate": sum(passes) / len(passes), "cost_per_task": cost}))
    batches: list[list[tuple[Genome, str, str]]] = []

    def evaluate(batch: Sequence[tuple[Genome, str, str]]) -> list[Any]:
        batches.append(list(batch))
        return [SimpleNamespace(report=dev_report(g, split)) for g, split, _ in batch]

    lines: list[str] = []
    chosen = select_on_dev(settings, paths, SearchTrials((tuple(trials),), (tuple(trials[1:]),), tuple(trials)), Pools(sections={}),
                           evaluate=evaluate, variant_of=variant_of, echo=lines.append)
    # max_front_dev=4: a slot is left free rather than spent on the member that cannot qualify
    dev = ["baseline-dev", "front-1-dev", "front-2-dev"]
    assert [label for _, _, label in batches[0]] == dev
    skipped = {m.trial: m.dev_skipped for m in chosen.front if m.dev_skipped}
    assert list(skipped) == [0, 3] and skipped[0] == "the incumbent itself"
    assert skipped[3].startswith("train pass_rate 0.250 against the incumbent's 0.750: the paired difference is at most -")
    assert lines[0] == "dev runs: 2 of 4 front members; no dev run for 2:"
    assert lines[2].startswith("  trial 3 (round 0: ") and "below the bar -0.05" in lines[2]


def _settings(tmp_path: Path) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.optimise.settings import RunSettings

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "search.resamples=300"])
    GlobalHydra.instance().clear()
    return RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])
