"""What a search fixes before its first paid call: freeze.json is written once, read back on a
resume, and a resume under another scorer or another config is refused with its fix."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.optimise.finish import Frozen
from evoharness.search.optimise.freeze import Splits, base_tools, freeze
from evoharness.search.optimise.settings import RunSettings, StudyPaths


@pytest.fixture()
def settings(tmp_path: Path) -> Iterator[RunSettings]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "search.train_limit=3"])
    GlobalHydra.instance().clear()
    yield RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


def frozen(settings: RunSettings) -> tuple[dict[str, object], StudyPaths]:
    paths = StudyPaths.of(settings)
    paths.dir.mkdir(parents=True, exist_ok=True)
    return freeze(settings, paths, Splits.of(settings), tools=base_tools(settings), echo=lambda _: None), paths


def test_train_is_cut_to_the_limit_and_the_other_splits_are_whole(settings: RunSettings) -> None:
    splits = Splits.of(settings)
    assert len(splits.task_ids["train"]) == 3
    assert splits.sizes() == {k: len(v) for k, v in splits.task_ids.items()}
    assert splits.task_ids["dev"] and splits.task_ids["holdout"]
    assert not set(splits.task_ids["dev"]) & set(splits.task_ids["holdout"])


def test_a_resume_reads_the_frozen_hashes_back(settings: RunSettings) -> None:
    first, paths = frozen(settings)
    stored = json.loads(paths.freeze.read_text(encoding="utf-8"))
    assert {k: stored[k] for k in first} == first and "created_at" in stored and "resolved_config" in stored
    again, _ = frozen(settings)
    assert Frozen.from_dict(again) == Frozen.from_dict(first)


def test_a_resume_under_another_scorer_is_refused_with_its_own_reason(settings: RunSettings) -> None:
    _, paths = frozen(settings)
    stored = json.loads(paths.freeze.read_text(encoding="utf-8"))
    paths.freeze.write_text(json.dumps({**stored, "scorer_hash": "0" * 64}), encoding="utf-8")
    with pytest.raises(ConfigError, match="another version of the workload's scorer"):
        frozen(settings)


def test_a_resume_under_another_seed_is_refused_naming_what_changed(settings: RunSettings) -> None:
    from dataclasses import replace

    frozen(settings)
    with pytest.raises(ConfigError, match="was started with a different config_hash, seed"):
        frozen(replace(settings, seed=settings.seed + 1))


def test_a_resume_under_other_mutators_names_them_and_the_stored_list(settings: RunSettings) -> None:
    """A newer version that adds a default mutator changes the config's hash: the refusal says it is
    the mutators, and where the list the study was started with is kept."""
    from dataclasses import replace

    frozen(settings)
    mutators = {**settings.resolved["mutators"], "enabled": [*settings.resolved["mutators"]["enabled"], {"name": "turn_limit"}]}
    with pytest.raises(ConfigError, match=r"different config_hash \(its mutators differ from freeze.json's resolved_config\)"):
        frozen(replace(settings, resolved={**settings.resolved, "mutators": mutators}))
