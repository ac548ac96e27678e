"""A search run: freeze, baseline, NSGA-II rounds with mutators between them, then the finish
(dev selection, the sealed holdout claim, the records).

Jobs are handed to a ``launch`` callable (the Hydra sweeper passes its launcher), so nothing here
knows how a job is executed. The run is a coordinator over three parts, each with its own data:
what is fixed before the first paid call (freeze), the evaluations and their store
(evaluations), and the rounds (rounds). What is enqueued, selected and decided is pure policy
(seeding, select).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import optuna

from evoharness.compiler.runtime.workload import Split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.genome import Genome, Pools, canonical
from evoharness.search.optimise.budget import SpendWatch
from evoharness.search.optimise.dashboard import rebuild_view
from evoharness.search.optimise.evaluations import Evaluations, Launch, SearchInterrupted
from evoharness.search.optimise.finish import FinishAborted, Frozen, SearchTrials, finish
from evoharness.search.optimise.forecast import forecast, forecast_line
from evoharness.search.optimise.freeze import Splits, base_tools, freeze, warn_uncovered
from evoharness.search.optimise.rounds import CONTROL_SEED_STRIDE, Rounds, SearchAborted, round_line, unevaluated
from evoharness.search.optimise.seeding import NewEntry, accumulated
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import TrialRecord, best_records, episode_keys, eval_keys, front_over, records
from evoharness.search.optimise.trial import TrialResult, TrialSpec
from evoharness.search.records.looks import holdout_hash

__all__ = ["CONTROL_SEED_STRIDE", "Launch", "SearchAborted", "SearchInterrupted", "SearchRun"]


class SearchRun:
    """One search. It owns no state of its own beyond the parts': the pools, specs, evaluations and
    compiled variants are the evaluations', the cap's verdict the rounds' (read through here)."""

    def __init__(self, settings: RunSettings, *, launch: Launch, echo: Callable[[str], None] = print,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.settings, self.s, self.echo = settings, settings.search, echo
        self.paths = StudyPaths.of(settings)
        self.paths.dir.mkdir(parents=True, exist_ok=True)
        self.objectives = settings.objectives
        self.quality = quality_objective(self.objectives)
        self.splits = Splits.of(settings)
        self.watch = SpendWatch(settings, self.paths.spend, tasks=self.splits.sizes(), echo=echo)
        self.evaluations = Evaluations(settings, self.paths, self.splits.task_ids, launch=launch, should_stop=should_stop)
        self.rounds = Rounds(settings, self.paths, self.splits.workload, self.evaluations, self.watch,
                             echo=echo, should_stop=should_stop, reserve=self.splits.reserve)

    @property
    def pools(self) -> Pools | None:
        """The latest round's pools: every genome of the search indexes into them."""
        return self.evaluations.pools

    @pools.setter
    def pools(self, pools: Pools | None) -> None:
        self.evaluations.pools = pools

    def spec(self, genome: Genome, split: Split, label: str, *, seed: int | None = None) -> TrialSpec:
        return self.evaluations.spec(genome, split, label, seed=seed)

    def run_jobs(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        return self.evaluations.run_jobs(specs)

    def evaluate(self, jobs: Sequence[tuple[Genome, Split, str]]) -> list[TrialResult | BaseException]:
        return self.evaluations.evaluate(jobs)

    def variant_of(self, genome: Genome) -> HarnessVariant:
        return self.evaluations.variant_of(genome)

    @property
    def capped(self) -> int | None:
        """The round in which search.budget_usd stopped new paid work."""
        return self.rounds.capped

    @functools.cached_property
    def base_tools(self) -> list[str]:
        return base_tools(self.settings)

    def freeze(self) -> Frozen:
        frozen = Frozen.from_dict(freeze(self.settings, self.paths, self.splits, tools=self.base_tools, echo=self.echo))
        held = self.splits.task_ids["holdout"]
        return dataclasses.replace(frozen, holdout_hash=holdout_hash(self.settings.workload.name, held),
                                   holdout_clusters=frozenset(self.splits.workload.task(t).cluster for t in held))

    def execute(self) -> dict[str, Any]:
        frozen = self.freeze()
        studies: list[optuna.Study] = []
        front: list[TrialRecord] = []
        earlier: set[str] = set()  # evaluations earlier rounds paid for: free to read again
        carried: tuple[NewEntry, ...] = ()
        combined: list[Genome] = []  # per anchor, the entries that improved it, together
        reference: tuple[float, float] | None = None  # the baseline's train quality and cost per task in the last round
        canon = functools.partial(canonical, base_format=self.settings.base_format, base_steps=self.settings.base_steps)
        # before anything is paid for (on resume too: it costs nothing, and the spend so far is in the journal)
        self.echo(forecast_line(forecast(self.settings, self.splits), self.settings, len(self.splits.task_ids["train"])))
        for k in range(self.s.rounds):
            if not self.rounds.may_begin(k):
                break
            rp = self.rounds.pools_for(k, front, carried, reference, combined)
            self.pools = rp.pools
            if k == 0:
                warn_uncovered(self.splits, self.base_tools, self.echo)
            studies.append(self.rounds.run_round(k, rp, front, earlier, reference=reference, combined=combined))
            rebuild_view(self.paths.storage, self.s.study, studies, self.objectives, rp.pools,
                         base_format=self.settings.base_format, base_steps=self.settings.base_steps)
            front = best_records(studies[-1], k)
            carried = unevaluated(studies[-1], rp)
            done = records(studies[-1], k)
            combined = accumulated(done, self.quality, canon=canon)
            reference = next(((r.quality(self.quality), float(r.train.get("cost_per_task", 0.0))) for r in done
                              if r.origin == "baseline" and r.state == "COMPLETE"), None)
            self.echo(round_line(k, studies[-1], rp, front, earlier, carried, budget=self.rounds.budget_episodes))
            earlier |= eval_keys(studies[-1]) | set(episode_keys(studies[-1]))
            if self.capped is not None:
                break
        assert self.pools is not None
        if not self.watch.may_start(0):
            est = self.watch.estimate()
            raise FinishAborted(f"search.budget_usd={self.s.budget_usd:g} leaves too little for the dev and holdout runs "
                                f"(${self.watch.spent():.4f} spent, about ${est.finish if est else 0:.4f} needed); "
                                "raise search.budget_usd and run the same command again: every evaluation is kept")
        trials = SearchTrials(per_round=tuple(tuple(records(s, k)) for k, s in enumerate(studies)),
                              round_fronts=tuple(tuple(best_records(s, k)) for k, s in enumerate(studies)),
                              front=tuple(front_over(studies, self.objectives)))
        summary = finish(self.settings, self.paths, frozen, trials, self.pools,
                         evaluate=self.evaluate, variant_of=self.variant_of, echo=self.echo,
                         budget={"budget_usd": self.s.budget_usd, "capped_in_round": self.capped,
                                 "projected_usd": None if self.watch.projected is None else round(self.watch.projected, 6)})
        return summary
