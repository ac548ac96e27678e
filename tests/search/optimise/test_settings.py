"""The search's settings are built once, typed and frozen; records carry a schema version."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.optimise.settings import RunSettings, SearchSettings, StudyPaths
from evoharness.search.records.versions import ALSO_READ, VERSIONS, checked, versioned


@pytest.fixture()
def compose(tmp_path: Path) -> Iterator[Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield lambda *overrides: hydra_compose(config_name="config", overrides=[f"runs_dir={tmp_path}", *overrides])
    GlobalHydra.instance().clear()


def test_search_settings_are_typed_tuples_and_frozen(compose: Any) -> None:
    s = SearchSettings.from_config(compose("search.rounds=3", "search.temperatures=[0,0.5]", "search.train_limit=null").search)
    assert (s.rounds, s.temperatures, s.train_limit, s.models) == (3, (0.0, 0.5), None, ("sim_small", "sim_medium", "sim_large"))
    assert all(isinstance(t, float) for t in s.temperatures)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.rounds = 4  # type: ignore[misc]
    # the resume check hashes plain JSON values, and only the keys that change a study's meaning
    part = s.frozen_part()
    assert part["temperatures"] == [0.0, 0.5] and "rounds" not in part and "trials_per_round" not in part


def test_run_settings_hold_plain_data_and_skip_the_incumbents_own_model(compose: Any, tmp_path: Path) -> None:
    st = RunSettings.from_config(compose("model=sim_medium", "search.storage='sqlite:///x.db'"), conf_dirs=[CONF_DIR])
    # sim_medium is the incumbent ("base"), so it is not offered a second time under its own name
    assert list(st.models) == ["base", "sim_small", "sim_large"] and st.models["base"]["route"] == "sim/medium"
    assert st.teacher is not None and st.teacher["route"] == "sim/large"
    assert isinstance(st.agent, dict) and [c.name for c in st.criteria] == ["quality", "tool_errors", "cost", "latency"]
    assert [o.metric for o in st.objectives] == ["pass_rate", "cost_per_task", "latency_p95"] and st.aggregation == "all"
    assert st.runs_dir == tmp_path.resolve() and st.cache_dir == str((tmp_path / "cache").resolve())
    assert [m.name for m in st.mutators][:1] == ["identity"] and st.pool_size >= 1
    assert st.base_format == "json" and st.base_steps == {s["name"]: bool(s.get("enabled", True)) for s in st.agent["workflow"]}
    paths = StudyPaths.of(st)
    assert paths.dir == tmp_path.resolve() / "bfcl_agent" and paths.storage == "sqlite:///x.db"
    assert paths.pools(2) == paths.dir / "pools" / "r2.json"


def test_the_default_study_is_named_by_the_workload_and_the_agent(compose: Any) -> None:
    def study(*overrides: str) -> str:
        return SearchSettings.from_config(compose(*overrides).search).study

    assert study() == "bfcl_agent"  # the agent's name already starts with the workload's
    assert study("agent.name=support_bot") == "bfcl-support_bot"  # a second agent on bfcl gets its own study
    assert study("search.study=mine") == "mine"
    with pytest.raises(ConfigError, match=r"search.study: 'bfcl-\.\./x' is not a plain name"):
        study("agent.name=../x")


def test_a_mutators_target_folded_into_the_incumbents_model_is_named_as_the_incumbents(compose: Any) -> None:
    st = RunSettings.from_config(compose("model=sim_medium", "mutators.enabled=[{name: escalate_on_trouble, params: {to: sim_medium}}]"),
                                 conf_dirs=[CONF_DIR])
    assert "sim_medium" not in st.models and st.mutators[0].params["to"] == "base"
    kept = RunSettings.from_config(compose("mutators.enabled=[{name: escalate_on_trouble, params: {to: sim_medium}}]"),
                                   conf_dirs=[CONF_DIR])
    assert kept.mutators[0].params["to"] == "sim_medium"


def test_storage_password_is_masked_in_the_resolved_config(compose: Any) -> None:
    st = RunSettings.from_config(compose("search.storage='postgresql://u:hunter2@db:5432/evo'"), conf_dirs=[CONF_DIR])
    assert "hunter2" not in str(st.resolved) and "hunter2" not in StudyPaths.of(st).storage_public


@pytest.mark.parametrize("kind", sorted(VERSIONS))
def test_records_carry_their_version_and_readers_refuse_another(kind: str) -> None:
    record = versioned(kind, {"a": 1, "schema_version": 99})
    assert next(iter(record)) == "schema_version" and record["schema_version"] == VERSIONS[kind]
    assert checked(kind, record, "x.json") == record
    if VERSIONS[kind] == 1 or 1 in ALSO_READ.get(kind, ()):
        assert checked(kind, {"a": 1}, "x.json") == {"a": 1}  # written before versioning: version 1, still read
    else:  # a kind past version 1 reads a record written before versioning as the old layout it is
        with pytest.raises(ConfigError, match=f"version 1 is not the version {VERSIONS[kind]}"):
            checked(kind, {"a": 1}, "x.json")
    for bad in (VERSIONS[kind] + 1, "1", None, True, 1.0):
        with pytest.raises(ConfigError) as err:
            checked(kind, {**record, "schema_version": bad}, "runs/s/x.json")
        assert "\n" not in str(err.value) and repr(bad) in str(err.value) and "runs/s/x.json" in str(err.value)
    with pytest.raises(ConfigError, match="a JSON object expected"):
        checked(kind, [1, 2], "x.json")


@pytest.mark.parametrize(
    "override, line",
    [
        ("mutators.enabled=[{name: nope}]", "mutators.enabled[0].name: unknown mutator 'nope'. Fix: use one of ["),
        ("mutators.enabled=[{name: rule_miner, params: {top_k: 0}}]",
         "mutators.enabled[0].params.top_k: rule_miner needs a positive integer, got 0"),
        ("mutators.enabled=[{name: identity, params: {bogus: 1}}]", "mutators.enabled[0].params: "),
        ("mutators.enabled=[{name: escalate_on_trouble, params: {to: gpt9}}]",
         "mutators.enabled[0].params.to: 'gpt9' is not one of search.models ['sim_small', 'sim_medium', 'sim_large']"),
        ("mutators.enabled=[{name: turn_limit, params: {factor: 1e308}}]", "mutators.enabled[0].params.factor: "),
        ("search.crossover=nope", "search.crossover: unknown crossover 'nope'"),
        ("search.sampler=../x", "search.sampler: unknown sampler '../x'"),
        ("search.rounds=0", "search.rounds: must be at least 1, got 0"),
        ("search.temperatures=[3.0]", "search.temperatures: [3.0] has a value outside [0, 2]"),
        ("search.models=[nope]", "search.models: no model config named 'nope'"),
        ("criteria.criteria.0.kind=nope", "criteria.criteria[0].kind: 'nope' is not a criterion kind"),
        ("search.study='../../etc'", "search.study: '../../etc' is not a plain name"),
        ("search.study=''", "search.study: '' is not a plain name"),
        ("search.study=/abs/study", "search.study: '/abs/study' is not a plain name"),
        ("search.study=a/b", "search.study: 'a/b' is not a plain name"),
        ("search.study=.hidden", "search.study: '.hidden' is not a plain name"),
        ("search.study=registry", "search.study: 'registry' is a folder evoharness itself keeps"),
    ],
)
def test_bad_settings_are_one_line_naming_the_path_once(compose: Any, override: str, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        RunSettings.from_config(compose(override), conf_dirs=[CONF_DIR])
    message = str(err.value)
    assert message.startswith(line) and "\n" not in message and message.count("Fix:") == 1
    path, problem = message.split(": ", 1)
    assert path not in problem.split(". Fix:")[0]  # the path is named once, where the line starts


class _Built(BaseException):
    """Stops the search once the sweeper has built its settings (nothing is run)."""


def test_the_preflight_checks_the_settings_the_sweeper_runs_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweeper runs inside hydra.main, which composes the config again: both build the settings
    with search_settings, from the released config (a promoted snapshot merged in) and the same argv."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.config_compile import to_plain
    from evoharness.compiler.release.registry import Registry
    from evoharness.compiler.release.snapshot import make_snapshot
    from evoharness.search.cli.main import main
    from evoharness.search.optimise import settings

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        base = hydra_compose(config_name="config", overrides=[f"runs_dir={tmp_path}"])
    GlobalHydra.instance().clear()
    agent = {**to_plain(base.agent), "tool_format": "bash"}
    registry = Registry(str(tmp_path / "registry"))
    snapshot = make_snapshot("bfcl_agent", {"agent": agent, "tool_overrides": {}, "model": to_plain(base.model)}, author="test")
    registry.write_snapshot(snapshot)
    registry.promote(snapshot.content_hash)

    built: list[RunSettings] = []
    real = settings.search_settings

    def recording(*args: Any, **kwargs: Any) -> RunSettings:
        built.append(real(*args, **kwargs))
        if len(built) == 2:  # the preflight's, then the sweeper's
            raise _Built
        return built[-1]

    monkeypatch.setattr(settings, "search_settings", recording)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Built):
        main(["search", f"runs_dir={tmp_path}", "search.study=same", "search.rounds=1", "mutators.pool_size=3",
              "model.temperature=0,0.7", "hydra/launcher=basic"])
    preflight, sweeper = built
    assert preflight == sweeper
    assert preflight.agent["tool_format"] == "bash" != base.agent.tool_format  # the release, not the base config
    assert preflight.search.temperatures == (0.0, 0.7) and preflight.pool_size == 3
