"""The search's settings, typed and frozen, built once from the composed config.

Nothing after the entry point reads a DictConfig: the sweeper builds a ``RunSettings`` and every
other module of the search takes it (or the part it needs).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.config_compile import plain_agent, to_plain
from evoharness.compiler.configpath import anchored_options
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import checked_name
from evoharness.compiler.schema import TOOL_FORMATS, SearchConfig
from evoharness.compiler.secrets import holds_secret, public_url
from evoharness.search.evaluation.criteria import Objective, OptimisationCriterion, build_criteria
from evoharness.search.evaluation.criteria import objectives as objectives_of
from evoharness.search.evaluation.decision import DEFAULT, DecisionRule, decision_rule
from evoharness.search.mutators.base import MUTATORS, Mutator
from evoharness.search.optimise.models_conf import load_model_config
from evoharness.search.optimise.race import MIN_FIRST_BLOCK, MIN_GROWTH, RaceSettings
from evoharness.search.optimise.study import CROSSOVERS, SAMPLERS
from evoharness.search.optimise.trial import WorkloadSettings

# folders under runs_dir that are not studies: the registry, compiled variants, the response cache
# and the Hydra run dirs of the other commands
RESERVED_STUDY_NAMES = frozenset({"registry", "compiled", "cache", "compile", "evaluate", "snapshot", "search", "search-multirun"})
# search settings that change what a resumed study means (budget keys may change on resume)
FROZEN_SEARCH_KEYS = ("seed", "models", "temperatures", "formats", "samples", "train_limit", "sampler", "crossover", "population_size",
                      "teacher", "confidence", "min_effect", "resamples", "max_front_dev")


@dataclass(frozen=True)
class SearchSettings:
    """``cfg.search`` (evoharness.compiler.schema.SearchConfig, where every field is documented), frozen."""

    study: str
    storage: str | None
    rounds: int
    trials_per_round: int
    population_size: int
    crossover: str
    sampler: str
    seed: int
    models: tuple[str, ...]
    temperatures: tuple[float, ...]
    formats: tuple[str, ...]
    samples: int
    train_limit: int | None
    max_front_dev: int
    confidence: float
    min_effect: float
    resamples: int
    max_failure_rate: float
    teacher: str | None
    second_look: bool = False
    allow_underpowered: bool = False
    budget_usd: float | None = None
    live_ok: bool = False
    race: RaceSettings = RaceSettings()
    sampler_share: float = 0.25

    @classmethod
    def from_config(cls, node: DictConfig) -> SearchSettings:
        # resolved where it sits in the whole config: a default such as ${workload.name} reads a key outside the node
        plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
        typed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SearchConfig), plain))
        assert isinstance(typed, SearchConfig)
        values: dict[str, Any] = {f.name: getattr(typed, f.name) for f in dataclasses.fields(cls)}
        frozen: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        frozen["race"] = RaceSettings(enabled=bool(typed.race.enabled), first_block=int(typed.race.first_block),
                                      growth=float(typed.race.growth), max_tasks=typed.race.max_tasks)
        return cls(**frozen).checked()

    def checked(self) -> SearchSettings:
        """These settings, or a ConfigError naming the first bad one and the fix."""
        checked_name("search.study", self.study, example="bfcl")  # runs/<study>/ must stay under runs/
        if holds_secret(self.study):  # a folder name, a database key and a printed line: never a secret's value
            raise ConfigError("search.study", "reads a secret's value from the environment", "name the study in plain text")
        if self.study in RESERVED_STUDY_NAMES:
            raise ConfigError("search.study", f"{self.study!r} is a folder evoharness itself keeps under runs_dir",
                              f"pick another name (not one of {sorted(RESERVED_STUDY_NAMES)})")
        if self.population_size < 2:  # NSGA-II breeds from pairs
            raise ConfigError("search.population_size", f"must be at least 2, got {self.population_size}",
                              "set search.population_size=2 or more")
        for key in ("rounds", "trials_per_round", "samples"):
            if getattr(self, key) < 1:
                raise ConfigError(f"search.{key}", f"must be at least 1, got {getattr(self, key)}",
                                  f"set search.{key} to a positive integer")
        if self.sampler not in SAMPLERS:
            raise ConfigError("search.sampler", f"unknown sampler {self.sampler!r}", f"use one of {list(SAMPLERS)}")
        if not 0.0 <= self.sampler_share < 1.0:  # NaN too: a round must leave its proposals some room
            raise ConfigError("search.sampler_share", f"must be in [0, 1), got {self.sampler_share}",
                              "use e.g. 0.25 (a quarter of each later round for the sampler), or 0 for none")
        if self.crossover not in CROSSOVERS:
            raise ConfigError("search.crossover", f"unknown crossover {self.crossover!r}", f"use one of {sorted(CROSSOVERS)}")
        bad = [f for f in self.formats if f not in TOOL_FORMATS]
        if bad or not self.formats:
            raise ConfigError("search.formats", f"unknown or empty tool formats {bad or list(self.formats)}",
                              f"choose from {list(TOOL_FORMATS)}")
        if any(not 0.0 <= t <= 2.0 for t in self.temperatures):
            raise ConfigError("search.temperatures", f"{list(self.temperatures)} has a value outside [0, 2]",
                              "use temperatures between 0 and 2")
        if not 0.5 <= self.confidence < 1.0:
            raise ConfigError("search.confidence", f"must be in [0.5, 1), got {self.confidence}", "use e.g. 0.95")
        if self.train_limit is not None and self.train_limit < 1:
            raise ConfigError("search.train_limit", f"must be at least 1 or null, got {self.train_limit}",
                              "set search.train_limit=null for the whole train split")
        if self.max_front_dev < 1:
            raise ConfigError("search.max_front_dev", f"must be at least 1, got {self.max_front_dev}",
                              "dev needs at least one front member")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ConfigError("search.max_failure_rate", f"must be a share in [0, 1], got {self.max_failure_rate}", "use e.g. 0.5")
        if self.resamples < 100:
            raise ConfigError("search.resamples", f"must be at least 100, got {self.resamples}", "use e.g. 10000 bootstrap resamples")
        if not 0 <= self.min_effect < 1:  # NaN fails too: it would pass a plain "< 0" and break the claim after the holdout is paid
            raise ConfigError("search.min_effect", f"must be 0 or more, got {self.min_effect}" if self.min_effect < 1 or
                              math.isnan(self.min_effect) else f"must be below 1 (a share of quality), got {self.min_effect}",
                              "use 0, or the smallest gain worth shipping, e.g. 0.03")
        for i, name in enumerate(self.models):
            checked_name(f"search.models[{i}]", name, example="sim_small")  # a model config file under conf/model/
        if self.teacher is not None:
            checked_name("search.teacher", self.teacher, example="sim_large")
        if self.race.first_block < MIN_FIRST_BLOCK:
            raise ConfigError("search.race.first_block", f"must be at least {MIN_FIRST_BLOCK} tasks, got {self.race.first_block}",
                              f"set search.race.first_block={MIN_FIRST_BLOCK} or more, or search.race.enabled=false")
        if not (self.race.growth >= MIN_GROWTH and math.isfinite(self.race.growth)):
            raise ConfigError("search.race.growth", f"must be at least {MIN_GROWTH:g}, got {self.race.growth}",
                              "use 2 (each block doubles the tasks) or more: slower growth adds looks, and each look can lose a good edit")
        if self.race.max_tasks is not None and self.race.max_tasks < 1:
            raise ConfigError("search.race.max_tasks", f"must be at least 1 or null, got {self.race.max_tasks}",
                              "set e.g. search.race.max_tasks=120, at most search.train_limit for no extension, or null for the whole "
                              "train split")
        if self.budget_usd is not None and not (self.budget_usd > 0 and math.isfinite(self.budget_usd)):
            raise ConfigError("search.budget_usd", f"must be a positive number of US dollars, got {self.budget_usd}",
                              "set e.g. search.budget_usd=5, or search.budget_usd=null for no cap")
        return self

    def frozen_part(self) -> dict[str, Any]:
        """The settings a resumed study must keep (JSON-able, for the freeze hash)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(self, k)) for k in FROZEN_SEARCH_KEYS)}


@dataclass(frozen=True)
class MutatorSetting:
    name: str
    weight: float
    params: Mapping[str, Any]

    def build(self, index: int) -> Mutator:
        """The mutator; a bad name or parameter is a ConfigError at ``mutators.enabled[index]``."""
        where = f"mutators.enabled[{index}]"
        factory = MUTATORS.lookup(self.name, path=f"{where}.name")
        try:
            return factory(**dict(self.params))
        except ConfigError as exc:  # the mutator names its own parameter (params.<name>)
            raise ConfigError(f"{where}.{exc.path}", exc.problem, exc.fix) from None
        except TypeError as exc:  # a parameter the mutator does not take
            raise ConfigError(f"{where}.params", str(exc), f"give {self.name} only the parameters it takes") from None


def _model_param(m: MutatorSetting, index: int, named: Sequence[str], models: Mapping[str, Any]) -> MutatorSetting:
    """A mutator's ``to`` parameter names a model of the search: checked before anything is paid
    for, and a model the search folded into the incumbent's (the same route) named as it is there."""
    to = m.params.get("to")
    if not isinstance(to, str):
        return m
    if to not in named and to != "base":
        raise ConfigError(f"mutators.enabled[{index}].params.to", f"{to!r} is not one of search.models {list(named)}",
                          f"add {to} to search.models, or name one of them")
    return m if to in models else replace(m, params={**m.params, "to": "base"})


@dataclass(frozen=True)
class RunSettings:
    """Everything a search run reads from the config, as plain typed data."""

    search: SearchSettings
    criteria: tuple[OptimisationCriterion, ...]  # validated (evoharness.search.evaluation.criteria)
    aggregation: str  # criteria.aggregation
    rule: DecisionRule  # criteria.decision, with its margin and reference
    margin: float  # criteria.margin
    reference: str  # criteria.reference: "incumbent" or a model name (the incumbent's harness on that model)
    objectives: tuple[Objective, ...]  # the search's objectives, from the criteria
    agent: Mapping[str, Any]  # the incumbent agent (promoted snapshot merged in)
    tool: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]  # "base" = the incumbent's model, then search.models by name
    teacher: Mapping[str, Any] | None  # search.teacher's model config
    workload: WorkloadSettings
    mutators: tuple[MutatorSetting, ...]
    pool_size: int
    seed: int
    runs_dir: Path
    registry_dir: str
    cache_dir: str | None  # absolute, or None when the response cache is off
    resolved: Mapping[str, Any]  # the whole resolved config, storage URL masked (for freeze.json)

    @classmethod
    def from_config(cls, cfg: DictConfig, *, conf_dirs: Sequence[str | Path] | None = None) -> RunSettings:
        search = SearchSettings.from_config(cfg.search)
        base_model: dict[str, Any] = to_plain(cfg.model)
        models: dict[str, Mapping[str, Any]] = {"base": base_model}
        for name in search.models:
            m = load_model_config(name, conf_dirs)
            if m["route"] != base_model["route"]:
                models[name] = m
        teacher = load_model_config(search.teacher, conf_dirs, path="search.teacher") if search.teacher else None
        criteria = build_criteria(cfg.criteria)
        if not criteria:  # "better" would mean only the default objectives, with no floor the champion must clear
            raise ConfigError("criteria.criteria", "is empty: nothing says what a better variant is or what it must not fall below",
                              "give at least one criterion (criteria=default is quality up, cost and latency down), or drop the override")
        mutators = tuple(_model_param(MutatorSetting(name=str(m.name), weight=float(m.weight), params=to_plain(m.params) or {}), i,
                                      search.models, models)
                         for i, m in enumerate(cfg.mutators.enabled))
        for i, mutator in enumerate(mutators):
            if not mutator.weight >= 0:  # 0 = never runs (documented); below 0 means nothing
                raise ConfigError(f"mutators.enabled[{i}].weight", f"must be 0 or more, got {mutator.weight}",
                                  "give a weight of 0 (never) to 1 or more (every round)")
            mutator.build(i)
        if int(cfg.mutators.pool_size) < 2:  # entry 0 is the baseline: below 2 no mutator could ever add one
            raise ConfigError("mutators.pool_size", f"must be at least 2, got {cfg.mutators.pool_size}",
                              "set mutators.pool_size=2 or more (the baseline takes one entry)")
        rule = decision_rule(str(cfg.criteria.get("decision", DEFAULT)), margin=_margin(float(cfg.criteria.get("margin", 0.05))))
        rule = replace(rule, reference=_reference(str(cfg.criteria.get("reference", "incumbent")), models, rule, search.models))
        resolved: dict[str, Any] = to_plain(cfg)
        if resolved["search"].get("storage"):
            resolved["search"]["storage"] = public_url(str(resolved["search"]["storage"]))
        return cls(
            search=search,
            criteria=criteria,
            aggregation=str(cfg.criteria.aggregation),
            rule=rule,
            margin=rule.margin,
            reference=rule.reference,
            objectives=objectives_of(criteria),
            agent=plain_agent(cfg.agent),
            tool=to_plain(cfg.tool),
            models=models,
            teacher=teacher,
            workload=WorkloadSettings(name=str(cfg.workload.name),
                                      options=anchored_options(to_plain(cfg.workload.options) or {}, _dirs(conf_dirs)),
                                      concurrency=int(cfg.workload.concurrency)),
            mutators=mutators,
            pool_size=int(cfg.mutators.pool_size),
            seed=int(cfg.seed),
            runs_dir=Path(str(cfg.runs_dir)).resolve(),
            registry_dir=str(cfg.registry_dir),
            cache_dir=_cache_location(cfg.cache_dir),
            resolved=resolved,
        )

    @property
    def decision(self) -> str:
        """criteria.decision's name, as the records write it."""
        return self.rule.name

    @property
    def base_format(self) -> str:
        return str(self.agent.get("tool_format", "json"))

    @property
    def base_steps(self) -> dict[str, bool]:
        """Every base workflow step and whether it is on (a pooled required step is on by default)."""
        return {s["name"]: bool(s.get("enabled", True)) for s in self.agent.get("workflow", [])}

    @property
    def step_names(self) -> list[str]:
        return [s["name"] for s in self.agent.get("workflow", [])]


def _dirs(conf_dirs: Sequence[str | Path] | None) -> list[Path] | None:
    return [Path(d) for d in conf_dirs] if conf_dirs is not None else None


def search_settings(cfg: DictConfig, overrides: Sequence[str], *, conf_dirs: Sequence[str | Path] | None = None) -> RunSettings:
    """The search's settings from the config that runs: the user's config (Hydra's own node holds
    job-time interpolations and is left out) with the promoted snapshot merged in, ``overrides``
    (the command's) on top, as compile releases it. The preflight and the sweeper both build them
    here from the same argv, so what was validated is what runs."""
    from evoharness.compiler.release.merge import apply_promoted

    user = OmegaConf.masked_copy(cfg, [str(k) for k in cfg.keys() if k != "hydra"])
    return RunSettings.from_config(apply_promoted(user, overrides), conf_dirs=conf_dirs)


@dataclass(frozen=True)
class StudyPaths:
    """Where a study's files live (``runs/<study>/``) and its storage URL."""

    dir: Path
    storage: str
    storage_public: str  # what records and reports may show: any password masked

    @classmethod
    def of(cls, settings: RunSettings) -> StudyPaths:
        d = settings.runs_dir / settings.search.study
        storage = settings.search.storage or f"sqlite:///{d / 'study.db'}"
        return cls(dir=d, storage=storage, storage_public=public_url(storage))

    @property
    def freeze(self) -> Path:
        return self.dir / "freeze.json"

    @property
    def evals(self) -> Path:
        return self.dir / "evals"

    @property
    def estimates(self) -> Path:
        """A raced proposal's quality estimate from the tasks beyond the train split, per evaluation key."""
        return self.dir / "estimates"

    @property
    def spend(self) -> Path:
        return self.dir / "spend.jsonl"

    @property
    def looks(self) -> Path:
        return self.dir / "holdout_looks.jsonl"

    def pools(self, k: int) -> Path:
        return self.dir / "pools" / f"r{k}.json"

    @property
    def claim(self) -> Path:
        return self.dir / "claim.json"

    @property
    def ledger(self) -> Path:
        return self.dir / "ledger.jsonl"

    @property
    def results(self) -> Path:
        return self.dir / "optimization_results.yaml"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.json"

    @property
    def report(self) -> Path:
        return self.dir / "report.html"

    @property
    def champion(self) -> Path:
        return self.dir / "champion.json"


def _reference(value: str, models: Mapping[str, Mapping[str, Any]], rule: DecisionRule, listed: Sequence[str]) -> str:
    if rule.check_reference(value) == "incumbent":
        return value
    named = [m for m in models if m != "base"]  # "base" is the settings' own key for the incumbent's model
    if value in listed and value not in named:
        raise ConfigError("criteria.reference", f"{value!r} is the incumbent's own model",
                          "use criteria.reference=incumbent (the default)")
    if value not in named:
        raise ConfigError("criteria.reference", f"unknown reference {value!r}",
                          f"use incumbent, or one of search.models other than the incumbent's own model: {named}")
    return value


def _margin(value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise ConfigError("criteria.margin", f"must be in [0, 1), got {value}", "use e.g. 0.05 (five points of quality)")
    return value


def _cache_location(value: object) -> str | None:
    """A folder made absolute (the jobs may run elsewhere); a Redis URL as it is."""
    from evoharness.compiler.runtime.cache import is_url

    if not value:
        return None
    return str(value) if is_url(str(value)) else str(Path(str(value)).resolve())
