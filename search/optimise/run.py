"""A search run: freeze, baseline, NSGA-II rounds with mutators between them, then the finish
(dev selection, the sealed holdout claim, the records).

Jobs are handed to a ``launch`` callable (the Hydra sweeper passes its launcher), so this module
holds the loop and nothing about how a job is executed. What is enqueued, selected and decided is
pure policy (seeding, select); this module is the storage, the launches and the files.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.provenance import git_revision
from evoharness.compiler.runtime.workload import Workload, workload_factory
from evoharness.compiler.variant import HarnessVariant, content_hash
from evoharness.search.evaluation.coverage import coverage_warning
from evoharness.search.evaluation.criteria import constraint_values, evaluate_criteria, objective_values, quality_objective
from evoharness.search.evaluation.scorer import scorer_hash
from evoharness.search.genome import BASELINE, Genome, Pools, authors, canonical, param_space, params_to_genome, with_new_entry
from evoharness.search.optimise.budget import SpendWatch
from evoharness.search.optimise.finish import FinishAborted, Frozen, SearchTrials, finish
from evoharness.search.optimise.mutation import RoundPools, first_pools, front_evidence, mutate, store_round, stored_round, teacher_runner
from evoharness.search.optimise.progress import Progress, progress_line, study_progress
from evoharness.search.optimise.seeding import NewEntry, accumulated, round_queue
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import (
    TrialRecord,
    best_records,
    distinct_evaluations,
    distributions,
    eval_keys,
    fail_stale,
    finished,
    free_rereads,
    front_over,
    make_sampler,
    mirror_round,
    paid_evaluations,
    records,
    round_study,
)
from evoharness.search.optimise.trial import JobInputError, TrialResult, TrialSpec, stored_result
from evoharness.search.records import doctor_record as doctor
from evoharness.search.records.provenance import split_strata, tasks_hash
from evoharness.search.records.spend import append_spend, mutator_spend_row, spend_row
from evoharness.search.records.versions import checked, versioned

Launch = Callable[[Sequence[TrialSpec]], list[TrialResult | BaseException]]
CONTROL_SEED_STRIDE = 7919  # identity controls draw fresh samples: a different seed per round


class SearchAborted(RuntimeError):
    """More trials failed than search.max_failure_rate allows."""


class SearchInterrupted(RuntimeError):
    """The user asked the search to stop (SIGINT/SIGTERM); what finished is kept."""


def unevaluated(study: optuna.Study, rp: RoundPools) -> tuple[NewEntry, ...]:
    """The round's proposals no completed trial carried."""
    genomes = [Genome.from_dict(t.user_attrs["genome"]) for t in finished(study)
               if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("genome")]
    return tuple(entry for entry in rp.added if not any(entry.chosen_by(g) for g in genomes))


def round_line(k: int, study: optuna.Study, rp: RoundPools, front: Sequence[TrialRecord], earlier: Collection[str],
               missed: Sequence[NewEntry]) -> str:
    """The per-round account: what the budget bought, what was free, and what became of the
    mutators' proposals (made = entries to try this round, carried ones included; evaluated =
    those a completed trial carried; ``missed``, the rest, go to the next round)."""
    done = finished(study)
    tried = len(rp.added) - len(missed)
    return (f"round {k}: {paid_evaluations(study, earlier)} paid evaluations, {free_rereads(study, earlier)} free re-reads, "
            f"{distinct_evaluations(study)} distinct, in {len(done)} trials; proposals: {len(rp.added)} made, "
            f"{tried} evaluated, {len(rp.added) - tried} not reached (tried first next round); "
            f"front of {len({t.variant_hash for t in front})} variants")


class SearchRun:
    def __init__(self, settings: RunSettings, *, launch: Launch, echo: Callable[[str], None] = print,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.settings, self.s, self.launch, self.echo = settings, settings.search, launch, echo
        self.should_stop = should_stop
        self.paths = StudyPaths.of(settings)
        self.paths.dir.mkdir(parents=True, exist_ok=True)
        self.criteria, self.aggregation, self.objectives = settings.criteria, settings.aggregation, settings.objectives
        self.quality = quality_objective(self.objectives)
        self.workload: Workload = workload_factory(settings.workload.name)(**dict(settings.workload.options))
        train = list(self.workload.tasks("train"))[: self.s.train_limit or None]
        self.task_ids = {
            "train": tuple(t.task_id for t in train),
            "dev": tuple(t.task_id for t in self.workload.tasks("dev")),
            "holdout": tuple(t.task_id for t in self.workload.tasks("holdout")),
        }
        self.mutators = [(m.build(i), m.weight) for i, m in enumerate(settings.mutators)]
        self.pools: Pools | None = None  # the latest round's: every genome of the search indexes into it
        self.capped: int | None = None  # the round in which search.budget_usd stopped new paid work
        self.watch = SpendWatch(settings, self.paths.spend, tasks={k: len(v) for k, v in self.task_ids.items()}, echo=echo)
        self._variants: dict[str, HarnessVariant] = {}  # genome -> compiled variant, so nothing is compiled twice

    # -- freeze -------------------------------------------------------------------------
    def freeze(self) -> Frozen:
        st = self.settings
        frozen = {
            "config_hash": content_hash({"agent": st.agent, "tool": st.tool, "models": st.models, "workload": st.workload.to_dict(),
                                         "criteria": st.resolved["criteria"], "mutators": st.resolved["mutators"], "seed": st.seed,
                                         "search": self.s.frozen_part()}),
            "workload_hash": content_hash([tasks_hash([self.workload.task(t) for t in ids]) for ids in self.task_ids.values()]),
            "splits_hash": content_hash({k: list(v) for k, v in self.task_ids.items()}),
            "scorer_hash": scorer_hash(self.workload),
            "seed": st.seed,
            "split_strata": split_strata({k: [self.workload.task(t) for t in ids] for k, ids in self.task_ids.items()}),
        }
        replayed = getattr(self.workload, "tool_outputs_hash", None)
        if replayed:  # the live tools' recorded outputs are part of what the claim was judged on
            frozen["tool_outputs_hash"] = str(replayed)
        checkup = doctor.status(st.runs_dir, self.workload.name,
                                doctor.workload_hash(self.workload, st.workload.options, tools=self.base_tools,
                                                     max_turns=int(st.agent.get("max_turns", 12))))
        unchecked = doctor.warning(checkup, self.workload.name)
        if unchecked:
            self.echo(unchecked)
        path = self.paths.freeze
        if path.exists():
            before = checked("freeze", json.loads(path.read_text(encoding="utf-8")), path)
            changed = [k for k in frozen if before.get(k) != frozen[k]]
            if changed == ["scorer_hash"]:
                raise ConfigError("search.study", f"study {self.s.study!r} was frozen under another version of the workload's scorer "
                                  "(its source changed), and one claim cannot compare variants judged by two scorers",
                                  f"start a new search.study, or delete {self.paths.dir}")
            if changed:
                raise ConfigError("search.study", f"study {self.s.study!r} was started with a different {', '.join(changed)}",
                                  f"resume with the same config, pick a new search.study, or delete {self.paths.dir}")
            return Frozen.from_dict(before)
        resolved = {**st.resolved, "search": {**st.resolved["search"], "storage": self.paths.storage_public}}
        write_json_atomic(path, versioned("freeze", {**frozen, "created_at": datetime.now(UTC).isoformat(), "git_revision": git_revision(),
                                                     "doctor": checkup, "resolved_config": resolved}))
        return Frozen.from_dict(frozen)

    # -- jobs ---------------------------------------------------------------------------
    def spec(self, genome: Genome, split: str, label: str, *, seed: int | None = None) -> TrialSpec:
        st = self.settings
        assert self.pools is not None, "a spec needs the round's pools"
        return TrialSpec(
            label=label, split=split, genome=genome, pools=self.pools, agent=st.agent, tool=st.tool,
            models=st.models, workload=st.workload, task_ids=self.task_ids[split], samples=self.s.samples,
            seed=st.seed if seed is None else seed, cache_dir=st.cache_dir,
        )

    def run_jobs(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        """Each spec's evaluation: read back from the study's store when it is there (no job is
        launched for it), else launched, and its result stored here. Only the orchestrator touches
        runs/<study>/: a job on another machine needs no shared filesystem."""
        out: list[TrialResult | BaseException | None] = []
        expected: dict[int, tuple[HarnessVariant, Path]] = {}
        first: dict[Path, int] = {}  # a genome asked twice in one batch is evaluated once
        for i, spec in enumerate(specs):
            variant = self.variant_of(spec.genome)
            path = self.paths.evals / f"{spec.eval_key(variant.content_hash)}.json"
            stored = stored_result(path, variant)  # one that cannot be read stops the search with its one line
            out.append(None if stored is None else replace(stored, label=spec.label))
            if stored is None:
                expected[i] = (variant, path)
                first.setdefault(path, i)
        todo = sorted(first.values())
        results = self.launch([specs[i] for i in todo]) if todo else []
        if len(results) != len(todo):
            raise RuntimeError(f"launcher returned {len(results)} results for {len(todo)} jobs")
        for i, res in zip(todo, results):  # before anything is stored: a batch from another build is refused whole
            if isinstance(res, TrialResult) and res.variant_hash != expected[i][0].content_hash:
                raise ConfigError("hydra/launcher", f"a job compiled variant {res.variant_hash[:12]} where this process compiled "
                                  f"{expected[i][0].content_hash[:12]} from the same genome: the machine that ran it has another "
                                  "evoharness, agent template or tool catalog", "install the same evoharness revision on every machine")
        by_path: dict[Path, TrialResult | BaseException] = {}
        for i, res in zip(todo, results):
            path = expected[i][1]
            if isinstance(res, TrialResult) and not res.report.metrics.get("skipped"):
                # an evaluation with skipped episodes is not final: a resume retries them (the response
                # cache replays every finished model call, so only the failed ones are paid again)
                write_json_atomic(path, res.to_dict())
            by_path[path] = res.error if isinstance(res, JobInputError) else res
        for i, (_, path) in expected.items():
            res = by_path[path]
            out[i] = res if first[path] == i or not isinstance(res, TrialResult) else replace(res, label=specs[i].label, reused=True)
        append_spend(self.paths.spend, [
            spend_row(eval_key=spec.eval_key(r.variant_hash), label=spec.label, split=spec.split, variant_hash=r.variant_hash,
                      metrics=r.report.metrics, model_calls=sum(e.model_calls for e in r.report.episodes))
            for spec, r in zip(specs, out) if isinstance(r, TrialResult) and not r.reused])
        # bad input a job found stops the search with its one line, once every finished result of the
        # batch is stored and journaled; the failed trials stay RUNNING, and a resume re-runs them
        bad = next((r for r in out if isinstance(r, ConfigError)), None)
        if bad is not None:
            raise bad
        return [r for r in out if r is not None]

    def evaluate(self, jobs: Sequence[tuple[Genome, str, str]]) -> list[TrialResult | BaseException]:
        """Evaluate (genome, split, label) jobs on the latest pools."""
        if self.should_stop():  # dev and holdout evaluations already stored are read back on resume
            raise SearchInterrupted("stopped by request")
        results = self.run_jobs([self.spec(g, split, label) for g, split, label in jobs])
        for (g, _, _), res in zip(jobs, results):
            if isinstance(res, TrialResult):
                self._variants.setdefault(self._genome_key(g), res.variant)
        return results

    def _genome_key(self, genome: Genome) -> str:
        st = self.settings
        return json.dumps(canonical(genome, base_format=st.base_format, base_steps=st.base_steps).to_dict(), sort_keys=True)

    def variant_of(self, genome: Genome) -> HarnessVariant:
        """The compiled variant of a genome under the latest pools (pool indices never change meaning)."""
        key = self._genome_key(genome)
        if key not in self._variants:
            self._variants[key] = self.spec(genome, "train", "compile").variant()
        return self._variants[key]

    @functools.cached_property
    def base_tools(self) -> list[str]:
        """The base agent's tools, from its config."""
        from evoharness.compiler.catalog import build_catalog, select_tools

        return [s.name for s in select_tools(self.settings.agent.get("tools") or [], build_catalog(self.settings.tool))]

    def warn_uncovered(self) -> None:
        """A line per split whose tasks call tools the base agent does not offer (they cannot pass)."""
        offered = self.base_tools
        for split, ids in self.task_ids.items():
            gap = coverage_warning(offered, [self.workload.task(t) for t in ids], where=split)
            if gap:
                self.echo(gap)

    # -- rounds -------------------------------------------------------------------------
    def pools_for(self, k: int, front: Sequence[TrialRecord], carried: Sequence[NewEntry] = (),
                  reference: tuple[float, float] | None = None, combined: Sequence[Genome] = ()) -> RoundPools:
        stored = stored_round(self.paths, k)
        if stored is not None:  # resumed: the pools this round already searched over (LLM mutators are not re-paid)
            return stored
        if self.pools is None:
            rp = RoundPools(first_pools(self.settings))
        else:
            # a carried proposal keeps its entry (and what its anchor picks) out of retirement, and so
            # does every entry of a combined genome this round will evaluate
            waiting = [*(with_new_entry(c.anchor or BASELINE, self.pools, c.kind, c.key, list(self.settings.base_steps), index=c.index)
                         for c in carried), *combined]
            costs: list[tuple[str, float]] = []
            evidence = front_evidence(self.paths, front)
            if (old := sum(1 for e in evidence if e.detail and not e.failures)) and old == len(evidence):
                self.echo(f"warning: the front's {old} failed train episodes were stored without failure records (an older "
                          "evoharness); the evidence-driven mutators have nothing to read: start a new search.study to re-score")
            rp = mutate(self.settings, k, self.pools, front, evidence, mutators=self.mutators,
                        run_teacher=teacher_runner(self.settings, self.workload, on_cost=lambda who, usd: costs.append((who, usd))),
                        echo=self.echo, keep=waiting, reference=reference, costs=costs)
            # the mutators' and the teacher's model calls are journaled like evaluations: the cap counts them
            append_spend(self.paths.spend, [mutator_spend_row(k, who, usd, index=i) for i, (who, usd) in enumerate(costs)])
            # proposals the last round's budget did not reach go first: nothing a mutator made is dropped
            rp = replace(rp, added=(*carried, *rp.added))
        store_round(self.paths, k, rp)
        return rp

    def run_round(self, k: int, rp: RoundPools, front: Sequence[TrialRecord], earlier: Collection[str] = (), *,
                  reference: tuple[float, float] | None = None, combined: Sequence[Genome] = ()) -> optuna.Study:
        sampler = make_sampler(population_size=self.s.population_size, seed=self.s.seed + k, crossover=self.s.crossover,
                               kind=self.s.sampler)
        study = round_study(self.paths.storage, self.s.study, k, self.objectives, sampler)
        if not study.get_trials(deepcopy=False):
            for q in round_queue(k, rp.pools, front, rp.added, rp.controls, quality=self.quality, budget=self.s.trials_per_round,
                                 base_format=self.settings.base_format, base_steps=self.settings.base_steps,
                                 margin=self.settings.rule.bar,
                                 reference=reference[0] if reference else None,
                                 reference_cost=reference[1] if reference else None, accumulated=combined):
                study.enqueue_trial(q.params, user_attrs=q.attrs)
        for p, attrs in fail_stale(study):
            study.enqueue_trial(p, user_attrs={**attrs, "rerun": True})
        dists = distributions(param_space(rp.pools))
        budget = self.s.trials_per_round
        asks_left = 3 * budget  # repeats are free but not endless: a tiny space can run out of new genomes
        with progress_line(f"round {k}", budget) as bar:
            self._batches(k, study, dists, earlier, budget, asks_left, bar)
        return study

    def _batches(self, k: int, study: optuna.Study, dists: Any, earlier: Collection[str], budget: int, asks_left: int,
                 bar: Progress) -> None:
        while (remaining := budget - paid_evaluations(study, earlier)) > 0 and asks_left > 0:
            size = self.watch.first_batch(min(self.s.population_size, remaining, asks_left))
            if not self.watch.may_start(size):
                self.capped = k
                self.echo(f"search.budget_usd={self.s.budget_usd:g} reached in round {k}: ${self.watch.spent():.4f} spent, "
                          "no new trial starts; the search finishes with what it measured (the finish was reserved)")
                break
            trials, specs = self._ask_batch(k, study, dists, paid=size, asks=asks_left, known={*earlier, *eval_keys(study)})
            asks_left -= len(trials)
            for t, spec, res in zip(trials, specs, self.run_jobs(specs)):
                self.tell(study, t, spec, res)
            self.watch.note(best_records(study, k), records(study, k), self.quality)
            bar.show(paid_evaluations(study, earlier), lambda: study_progress(study, self.quality, self.watch.spent(), self.watch.bar()))
            if self.should_stop():  # after the batch's results are told: nothing paid is lost
                raise SearchInterrupted("stopped by request")
            done = finished(study)
            failed = sum(1 for t in done if t.state == optuna.trial.TrialState.FAIL)
            if len(done) >= self.s.population_size and failed / len(done) > self.s.max_failure_rate:
                first = next((str(t.user_attrs["error"]) for t in done if t.user_attrs.get("error")),
                             "see the job logs under the sweep dir")
                raise SearchAborted(f"{failed} of {len(done)} trials failed in round {k} "
                                    f"(search.max_failure_rate={self.s.max_failure_rate}); "
                                    f"first error: {first}")

    def _ask_batch(self, k: int, study: optuna.Study, dists: Any, *, paid: int, asks: int, known: Collection[str]
                   ) -> tuple[list[optuna.Trial], list[TrialSpec]]:
        """Trials asked until ``paid`` of them are new evaluations (or ``asks`` run out), all before
        any is told. A repeat of a known genome is answered from the store, so counting it against
        the batch would leave workers idle: a batch of six asks is often two evaluations."""
        trials: list[optuna.Trial] = []
        specs: list[TrialSpec] = []
        new: set[str] = set()
        while len(new) < paid and len(trials) < asks:
            t = study.ask(dists)
            # enqueued trials have every param fixed, and Optuna then never consults the sampler,
            # so NSGA-II would not count them in a generation (nor use them as parents)
            _ = t.relative_params
            seed = self.settings.seed + CONTROL_SEED_STRIDE * (k + 1) if t.user_attrs.get("control") else None
            spec = self.spec(params_to_genome(t.params), "train", f"r{k}-t{t.number}", seed=seed)
            key = spec.eval_key(self.variant_of(spec.genome).content_hash)
            if key not in known:
                new.add(key)
            trials.append(t)
            specs.append(spec)
        return trials, specs

    def tell(self, study: optuna.Study, trial: optuna.Trial, spec: TrialSpec, res: TrialResult | BaseException) -> None:
        trial.set_user_attr("genome", spec.genome.to_dict())
        trial.set_user_attr("authors", list(authors(spec.genome, spec.pools, self.settings.step_names)))
        if isinstance(res, BaseException):
            trial.set_user_attr("error", f"{type(res).__name__}: {res}"[:500])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        self._variants.setdefault(self._genome_key(spec.genome), res.variant)
        metrics = dict(res.report.metrics)
        values = objective_values(res.report, self.criteria, self.objectives)
        trial.set_user_attr("variant_hash", res.variant_hash)
        trial.set_user_attr("eval_key", spec.eval_key(res.variant_hash))
        trial.set_user_attr("train", metrics)
        if any(v is None for v in values):
            missing = [o.metric for o, v in zip(self.objectives, values) if v is None]
            why = ("no scored episode: every episode was skipped as an infrastructure failure" if not metrics.get("scored")
                   else f"objective metric(s) {missing} could not be measured on this report")
            trial.set_user_attr("error", why)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        verdict = evaluate_criteria(res.report, self.criteria, self.aggregation)
        # Hard criteria are Optuna constraints (<= 0 feasible): NSGA-II ranks and best_trials filter by them.
        for c, value in zip([c for c in self.criteria if c.hard], constraint_values(verdict)):
            trial.set_constraint(c.name, value)
        trial.set_user_attr("feasible", verdict.feasible)
        study.tell(trial, values=[float(v) for v in values if v is not None])

    # -- whole run ----------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        frozen = self.freeze()
        studies: list[optuna.Study] = []
        front: list[TrialRecord] = []
        earlier: set[str] = set()  # evaluations earlier rounds paid for: free to read again
        carried: tuple[NewEntry, ...] = ()
        combined: list[Genome] = []  # per anchor, the entries that improved it, together
        reference: tuple[float, float] | None = None  # the baseline's train quality and cost per task in the last round
        for k in range(self.s.rounds):
            if k and stored_round(self.paths, k) is None and not self.watch.may_start(self.s.population_size):
                self.capped = k  # the mutators (LLM calls) and the round would both spend past the cap
                self.echo(f"search.budget_usd={self.s.budget_usd:g} reached before round {k}: ${self.watch.spent():.4f} spent; "
                          "the search finishes with what it measured (the finish was reserved)")
                break
            rp = self.pools_for(k, front, carried, reference, combined)
            self.pools = rp.pools
            if k == 0:
                self.warn_uncovered()
            studies.append(self.run_round(k, rp, front, earlier, reference=reference, combined=combined))
            mirror_round(self.paths.storage, self.s.study, studies[-1], k, self.objectives)
            front = best_records(studies[-1], k)
            carried = unevaluated(studies[-1], rp)
            done = records(studies[-1], k)
            combined = accumulated(done, self.quality, canon=lambda g: canonical(g, base_format=self.settings.base_format,
                                                                                base_steps=self.settings.base_steps))
            reference = next(((r.quality(self.quality), float(r.train.get("cost_per_task", 0.0))) for r in done
                              if r.origin == "baseline" and r.state == "COMPLETE"), None)
            self.echo(round_line(k, studies[-1], rp, front, earlier, carried))
            earlier |= eval_keys(studies[-1])
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
                         budget={"budget_usd": self.s.budget_usd, "capped_in_round": self.capped})
        return summary
