"""Optuna glue: one study per round (a categorical's choices may not change inside a study),
NSGA-II (hard criteria reach it as trial constraints), and the Pareto front over every round.
"""
from __future__ import annotations

import logging
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler, NSGAIISampler, RandomSampler, TPESampler
from optuna.samplers.nsgaii import (
    BLXAlphaCrossover,
    SBXCrossover,
    SPXCrossover,
    UNDXCrossover,
    UniformCrossover,
    VSBXCrossover,
)
from optuna.trial import FrozenTrial, TrialState

from evoharness.compiler.errors import ConfigError
from evoharness.search.evaluation.criteria import Objective
from evoharness.search.genome import Genome

CROSSOVERS: dict[str, type[UniformCrossover] | type[BLXAlphaCrossover] | type[SBXCrossover] | type[VSBXCrossover] | type[UNDXCrossover]
                 | type[SPXCrossover]] = {
    "uniform": UniformCrossover, "blxalpha": BLXAlphaCrossover, "sbx": SBXCrossover, "vsbx": VSBXCrossover, "undx": UNDXCrossover,
    "spx": SPXCrossover,
}

optuna.logging.set_verbosity(logging.WARNING)


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the search's policy and records read it (built from the study, never a live trial)."""

    number: int  # the trial's number in its round's study
    round: int
    state: str  # COMPLETE | FAIL | RUNNING | ...
    genome: Genome | None  # None for a trial that failed before its genome was recorded
    variant_hash: str = ""
    values: tuple[float, ...] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    train: Mapping[str, float] = field(default_factory=dict)
    feasible: bool = False
    origin: str = "sampler"  # baseline | one_change | control | front | new:<author> | sampler
    control: str | None = None  # the mutator that asked for this control re-evaluation
    authors: tuple[str, ...] = ()
    error: str | None = None
    eval_key: str | None = None
    anchor: Genome | None = None  # for a new entry's trial: the front member it was tried on
    race: Mapping[str, Any] | None = None  # for a new entry's trial: its paired evidence against the anchor (racing.RaceRecord)
    estimate: Mapping[str, Any] | None = None  # {metric, value}: the quality objective a race measured on more paired tasks

    @classmethod
    def of(cls, t: FrozenTrial, round_index: int) -> TrialRecord:
        a = t.user_attrs
        return cls(
            number=int(a.get("round_trial", t.number)), round=int(a.get("round", round_index)), state=t.state.name,
            genome=Genome.from_dict(a["genome"]) if a.get("genome") else None, variant_hash=str(a.get("variant_hash", "")),
            values=tuple(t.values) if t.values else None, params=dict(a.get("params", t.params)), train=dict(a.get("train") or {}),
            feasible=bool(a.get("feasible", False)), origin=str(a.get("origin", "sampler")), control=a.get("control"),
            authors=tuple(a.get("authors", ())), error=a.get("error"), eval_key=a.get("eval_key"),
            anchor=Genome.from_dict(a["anchor"]) if isinstance(a.get("anchor"), dict) else None,
            race=a.get("race") if isinstance(a.get("race"), dict) else None,
            estimate=a.get("estimate") if isinstance(a.get("estimate"), dict) else None,
        )

    def quality(self, metric: str) -> float:
        """The train quality the search ranks by: a race's estimate from more paired tasks when it
        made one (racing.Racer), else the train evaluation's."""
        if self.estimate is not None and self.estimate.get("metric") == metric:
            return float(self.estimate["value"])
        return float(self.train.get(metric, 0.0))


def records(study: optuna.Study, round_index: int) -> list[TrialRecord]:
    return [TrialRecord.of(t, round_index) for t in study.get_trials(deepcopy=False)]


def best_records(study: optuna.Study, round_index: int) -> list[TrialRecord]:
    """The round's constraint-aware Pareto front (Optuna's best_trials)."""
    return [TrialRecord.of(t, round_index) for t in study.best_trials]


SAMPLERS = ("nsga2", "tpe", "random")


def make_sampler(*, population_size: int, seed: int, crossover: str, kind: str = "nsga2") -> BaseSampler:
    """The round's sampler. NSGA-II is the default; multi-objective TPE (its first
    ``population_size`` trials random) did as well or a little better on the paid-budget
    benchmark (bench/search_efficiency.py), and random search is the control. All three read the
    hard criteria from the trials' constraints."""
    if kind not in SAMPLERS:
        raise ValueError(f"search.sampler={kind!r} is unknown; use one of {list(SAMPLERS)}")
    if kind == "tpe":
        return TPESampler(seed=seed, n_startup_trials=population_size)
    if kind == "random":
        return RandomSampler(seed=seed)
    if crossover not in CROSSOVERS:
        raise ValueError(f"search.crossover={crossover!r} is unknown; use one of {sorted(CROSSOVERS)}")
    return NSGAIISampler(population_size=population_size, seed=seed, crossover=CROSSOVERS[crossover]())


def distributions(space: Mapping[str, tuple[Any, ...]]) -> dict[str, BaseDistribution]:
    return {name: CategoricalDistribution(choices) for name, choices in space.items()}


def round_study(storage: str, study: str, round_index: int, objectives: Sequence[Objective], sampler: BaseSampler) -> optuna.Study:
    created = optuna.create_study(
        storage=storage,
        study_name=f"{study}/r{round_index}",
        directions=[o.direction for o in objectives],
        sampler=sampler,
        load_if_exists=True,
    )
    names = [o.metric for o in objectives]
    if created.metric_names != names:  # optuna-dashboard then labels the axes by metric, not "0", "1", "2"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            created.set_metric_names(names)
    return created


def finished(study: optuna.Study) -> list[FrozenTrial]:
    """Trials that count toward the budget: evaluated, raced out (pruned) or failed, not cut short by an interruption."""
    return [
        t for t in study.get_trials(deepcopy=False)
        if t.state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED) and not t.user_attrs.get("interrupted")
    ]


def episode_keys(study: optuna.Study) -> dict[str, int]:
    """The evaluations the round's finished trials paid for or read, each with its episodes (tasks x
    samples): a full evaluation's key, a raced proposal's blocks. A raced proposal's merged full
    evaluation is listed at 0 (its blocks paid for it), and a key several trials hold counts at the
    least any of them says, so reading that merged evaluation again is free. A failed trial counts
    the episodes it was asked to run, under its own key."""
    return least_counts(held for t in finished(study) if isinstance(held := t.user_attrs.get("episodes"), dict))


def least_counts(held: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Each evaluation key's episodes, at the least any holder says (a merged evaluation its blocks
    paid for is held at 0 by the trial that merged it)."""
    out: dict[str, int] = {}
    for counts in held:
        for key, n in counts.items():
            out[key] = min(int(n), out.get(key, int(n)))
    return out


def paid_episodes(study: optuna.Study, earlier: Collection[str] = ()) -> int:
    """What the round's budget counts: episodes of evaluations new to the search (an evaluation an
    earlier round paid for is read from the study's store for free)."""
    return sum(n for key, n in episode_keys(study).items() if key not in earlier)


def eval_keys(study: optuna.Study) -> set[str]:
    """The evaluations (split, seed, variant) the round's completed trials stand for."""
    return {str(t.user_attrs["eval_key"]) for t in finished(study) if t.state == TrialState.COMPLETE and t.user_attrs.get("eval_key")}


def paid_evaluations(study: optuna.Study, earlier: Collection[str] = ()) -> int:
    """What the round's budget counts: evaluations new to the search (not of a genome an earlier
    round, or an earlier trial of this round, already evaluated on the same split and seed: that
    one is read from the study's store for free), plus failed trials. An evaluation stored just
    before a kill counts once, as paid, when the resumed run reads it back."""
    failed = sum(1 for t in finished(study) if t.state == TrialState.FAIL)
    return len(eval_keys(study) - set(earlier)) + failed


def free_rereads(study: optuna.Study, earlier: Collection[str] = ()) -> int:
    """Completed trials of the round answered from the study's store: repeats within the round and
    genomes an earlier round evaluated."""
    complete = sum(1 for t in finished(study) if t.state == TrialState.COMPLETE and t.user_attrs.get("eval_key"))
    return complete - len(eval_keys(study) - set(earlier))


def distinct_evaluations(study: optuna.Study) -> int:
    """What the round's budget counts: distinct evaluations (a genome the sampler proposes again is
    answered from the stored evaluation and costs nothing) plus failed trials."""
    keys = {t.user_attrs.get("eval_key") for t in finished(study) if t.state == TrialState.COMPLETE}
    return len(keys - {None}) + sum(1 for t in finished(study) if t.state == TrialState.FAIL)


def fail_stale(study: optuna.Study) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Trials left RUNNING by an interrupted run are closed (marked, so they do not use up the
    budget); their params and attributes are returned to be enqueued again."""
    stale = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for t in stale:
        trial = optuna.Trial(study, t._trial_id)
        trial.set_user_attr("interrupted", True)
        study.tell(trial, state=TrialState.FAIL)
    return [(dict(t.params), {k: v for k, v in t.user_attrs.items() if k in ("origin", "control", "anchor")}) for t in stale]


def front_over(rounds: Sequence[optuna.Study], objectives: Sequence[Objective]) -> list[TrialRecord]:
    """Constraint-aware Pareto front over all rounds' completed trials (Optuna's own best_trials).

    The trials are copied, without their params (each round has its own categorical choices,
    which one study may not mix), into an in-memory study so Optuna does the dominance and
    feasibility bookkeeping; the genome, round and trial number travel in user attributes.
    """
    combined = optuna.create_study(storage=optuna.storages.InMemoryStorage(), directions=[o.direction for o in objectives])
    for k, s in enumerate(rounds):
        for t in s.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            attrs = {**t.user_attrs, "round": k, "round_trial": t.number, "params": dict(t.params)}
            combined.add_trial(optuna.trial.create_trial(values=t.values, user_attrs=attrs, system_attrs=t.system_attrs))
    return [TrialRecord.of(t, 0) for t in combined.best_trials]


def check_storage(url: str) -> None:
    """Before any paid work: ``url`` is a database URL Optuna can open, reached once, and writable.
    A SQLite file is not created here (a folder that would hold it is probed instead)."""
    import tempfile
    from pathlib import Path

    import sqlalchemy
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    from evoharness.compiler.secrets import public_url

    shown = public_url(url)
    connect_args: dict[str, Any] = {}
    fix = "use a SQLAlchemy URL, e.g. sqlite:///runs/study.db or postgresql://user@host/db, or leave search.storage null"
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, ValueError) as exc:
        raise ConfigError("search.storage", f"{shown!r} is not a database URL ({exc})", fix) from None
    except (NoSuchModuleError, ImportError) as exc:
        raise ConfigError("search.storage", f"{shown!r}: no database driver for it ({exc})",
                          "install the driver (e.g. pip install psycopg2-binary) or use sqlite:///...") from None
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:" or "mode=memory" in str(parsed.query):
            raise ConfigError("search.storage", f"{shown!r} is a database in memory: it ends with the process, so a resume "
                              "finds nothing and a second search cannot be locked out",
                              "name a file (sqlite:///runs/study.db), or leave search.storage null for runs/<study>/study.db")
        folder = Path(parsed.database or "").absolute().parent
        try:
            if not folder.is_dir():
                raise OSError(f"{folder} is not an existing folder")
            Path(tempfile.mkdtemp(prefix=".evoharness-probe-", dir=folder)).rmdir()
        except OSError as exc:
            raise ConfigError("search.storage", f"{shown!r} cannot be written ({exc.strerror or exc})",
                              "point it at a file in a folder you can write, or leave search.storage null") from None
        if not Path(parsed.database or "").absolute().exists():
            return  # Optuna creates it
    elif parsed.get_backend_name() in ("postgresql", "mysql"):
        connect_args = {"connect_timeout": 10}
    try:
        engine = sqlalchemy.create_engine(parsed, connect_args=connect_args)
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("select 1"))
            if parsed.get_backend_name() == "sqlite":  # an existing file that is not a database fails here
                conn.execute(sqlalchemy.text("select count(*) from sqlite_master"))
        engine.dispose()
    except ImportError as exc:
        raise ConfigError("search.storage", f"{shown!r}: no database driver for it ({exc})",
                          "install the driver (e.g. pip install psycopg2-binary) or use sqlite:///...") from None
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise ConfigError("search.storage", f"cannot open {shown!r} ({first})",
                          "start the database or correct the URL (host, port, user, database)") from None
