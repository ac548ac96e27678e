"""A search's rounds: the pools each round searches over (the mutators grow them between rounds),
the trials a round enqueues and asks the sampler for in batches, what each trial is told, and the
checks between batches (the spend cap, a stop request, the failure rate)."""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

import optuna

from evoharness.compiler.runtime.workload import Workload
from evoharness.search.evaluation.criteria import constraint_values, evaluate_criteria, objective_values, quality_objective
from evoharness.search.genome import BASELINE, Genome
from evoharness.search.genome_edits import authors
from evoharness.search.genome_params import param_space, params_to_genome
from evoharness.search.optimise.budget import SpendWatch
from evoharness.search.optimise.evaluations import Evaluations, SearchInterrupted
from evoharness.search.optimise.mutation import (
    RoundPools,
    first_pools,
    front_evidence,
    front_load,
    mutate,
    store_round,
    stored_round,
    teacher_runner,
)
from evoharness.search.optimise.progress import Progress, progress_line, study_progress
from evoharness.search.optimise.racing import Outcome, Racer
from evoharness.search.optimise.seeding import NewEntry, Queued, round_queue
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
    make_sampler,
    paid_episodes,
    paid_evaluations,
    records,
    round_study,
)
from evoharness.search.optimise.trial import TrialResult, TrialSpec
from evoharness.search.pool_growth import with_new_entry
from evoharness.search.records.format import race_text
from evoharness.search.records.spend import append_spend, mutator_spend_row

CONTROL_SEED_STRIDE = 7919  # identity controls draw fresh samples: a different seed per round


class SearchAborted(RuntimeError):
    """More trials failed than search.max_failure_rate allows."""


def unevaluated(study: optuna.Study, rp: RoundPools) -> tuple[NewEntry, ...]:
    """The round's proposals no completed or raced-out trial carried."""
    judged = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    genomes = [Genome.from_dict(t.user_attrs["genome"]) for t in finished(study) if t.state in judged and t.user_attrs.get("genome")]
    return tuple(entry for entry in rp.added if not any(entry.chosen_by(g) for g in genomes))


def round_line(k: int, study: optuna.Study, rp: RoundPools, front: Sequence[TrialRecord], earlier: Collection[str],
               missed: Sequence[NewEntry], *, budget: int | None = None) -> str:
    """The per-round account: what the budget bought (evaluations, and episodes against the round's
    ``budget`` of them), what was free, what became of the mutators' proposals (made = entries to
    try this round, carried ones included; evaluated = those a completed or raced-out trial
    carried; ``missed``, the rest, go to the next round), then a line per proposal raced against
    its anchor: its decision, the tasks it ran and its paired difference."""
    done = finished(study)
    tried = len(rp.added) - len(missed)
    raced = [t for t in done if isinstance(t.user_attrs.get("race"), dict)]
    decisions = [t.user_attrs["race"]["decision"] for t in raced]
    of = f" of {budget}" if budget is not None else ""
    head = (f"round {k}: {paid_evaluations(study, earlier)} paid evaluations, {free_rereads(study, earlier)} free re-reads, "
            f"{distinct_evaluations(study)} distinct, in {len(done)} trials; {paid_episodes(study, earlier)}{of} paid episodes; "
            f"proposals: {len(rp.added)} made, {tried} evaluated, {len(rp.added) - tried} not reached (tried first next round); "
            f"raced: {decisions.count('accepted')} accepted, {decisions.count('undecided')} undecided, "
            f"{decisions.count('rejected')} rejected ({sum(1 for t in raced if t.state == optuna.trial.TrialState.PRUNED)} early), "
            f"{sum(1 for t in raced if t.user_attrs['race'].get('extended'))} measured beyond the train tasks; "
            f"front of {len({t.variant_hash for t in front})} variants")
    lines = [f"  trial {t.number} ({t.user_attrs.get('origin')}): {race_text(t.user_attrs['race'])}" for t in raced]
    return "\n".join([head, *lines])


def anchor_of(trial: optuna.Trial) -> Genome | None:
    """The front member a proposal was tried on (its race pairs the two), or None for any other trial."""
    anchor = trial.user_attrs.get("anchor")
    return Genome.from_dict(anchor) if str(trial.user_attrs.get("origin", "")).startswith("new:") and isinstance(anchor, dict) else None


class Rounds:
    """The rounds of one search. ``capped`` is the round in which search.budget_usd stopped new
    paid work (None while it has not)."""

    def __init__(self, settings: RunSettings, paths: StudyPaths, workload: Workload, evaluations: Evaluations, watch: SpendWatch, *,
                 echo: Callable[[str], None], should_stop: Callable[[], bool], reserve: Sequence[str] = ()) -> None:
        self.settings, self.s, self.paths, self.workload = settings, settings.search, paths, workload
        self.evaluations, self.watch, self.echo, self.should_stop = evaluations, watch, echo, should_stop
        self.objectives = settings.objectives
        self.quality = quality_objective(self.objectives)
        self.mutators = [(m.build(i), m.weight) for i, m in enumerate(settings.mutators)]
        self.capped: int | None = None
        self.racer = Racer(evaluations, race=self.s.race, quality=self.quality, confidence=self.s.confidence,
                           cost=any(o.metric == "cost_per_task" for o in self.objectives), reserve=reserve)

    @property
    def full_episodes(self) -> int:
        """The episodes of one full train evaluation."""
        return len(self.evaluations.task_ids["train"]) * self.s.samples

    @property
    def budget_episodes(self) -> int:
        """A round's budget: search.trials_per_round full train evaluations' worth of episodes, so a
        proposal raced out early leaves the rest of its evaluation to another one."""
        return self.s.trials_per_round * self.full_episodes

    def pools_for(self, k: int, front: Sequence[TrialRecord], carried: Sequence[NewEntry] = (),
                  reference: tuple[float, float] | None = None, combined: Sequence[Genome] = ()) -> RoundPools:
        stored = stored_round(self.paths, k)
        if stored is not None:  # resumed: the pools this round already searched over (LLM mutators are not re-paid)
            return stored
        pools = self.evaluations.pools
        if pools is None:
            rp = RoundPools(first_pools(self.settings))
        else:
            # a carried proposal keeps its entry (and what its anchor picks) out of retirement, and so
            # does every entry of a combined genome this round will evaluate
            waiting = [*(with_new_entry(c.anchor or BASELINE, pools, c.kind, c.key, list(self.settings.base_steps), index=c.index)
                         for c in carried), *combined]
            costs: list[tuple[str, float | None]] = []
            evidence = front_evidence(self.paths, front)
            if (old := sum(1 for e in evidence if e.detail and not e.failures)) and old == len(evidence):
                self.echo(f"warning: the front's {old} failed train episodes were stored without failure records (an older "
                          "evoharness); the evidence-driven mutators have nothing to read: start a new search.study to re-score")
            rp = mutate(self.settings, k, pools, front, evidence, mutators=self.mutators,
                        run_teacher=teacher_runner(self.settings, self.workload, on_cost=lambda who, usd: costs.append((who, usd))),
                        echo=self.echo, keep=waiting, reference=reference, costs=costs, loads=front_load(self.paths, front))
            # the mutators' and the teacher's model calls are journaled like evaluations: the cap counts them
            append_spend(self.paths.spend, [mutator_spend_row(k, who, usd, index=i) for i, (who, usd) in enumerate(costs)])
            # proposals the last round's budget did not reach go first: nothing a mutator made is dropped
            rp = replace(rp, added=(*carried, *rp.added))
        store_round(self.paths, k, rp)
        return rp

    def may_begin(self, k: int) -> bool:
        """Whether round ``k`` may start under the cap: a round not yet stored pays for its mutators
        (LLM calls) and its batch, so it waits until both fit."""
        if k and stored_round(self.paths, k) is None and not self.watch.may_start(self.s.population_size):
            self.capped = k
            self.echo(f"search.budget_usd={self.s.budget_usd:g} reached before round {k}: ${self.watch.spent():.4f} spent; "
                      "the search finishes with what it measured (the finish was reserved)")
            return False
        return True

    def run_round(self, k: int, rp: RoundPools, front: Sequence[TrialRecord], earlier: Collection[str] = (), *,
                  reference: tuple[float, float] | None = None, combined: Sequence[Genome] = ()) -> optuna.Study:
        sampler = make_sampler(population_size=self.s.population_size, seed=self.s.seed + k, crossover=self.s.crossover,
                               kind=self.s.sampler)
        study = round_study(self.paths.storage, self.s.study, k, self.objectives, sampler)
        share = self.racer.first_share(len(self.evaluations.task_ids["train"]))
        # a raced proposal may cost only its first block: the queue holds as many as that would buy
        queue = round_queue(k, rp.pools, front, rp.added, rp.controls, quality=self.quality, budget=self.s.trials_per_round,
                            proposal_cost=share,
                            base_format=self.settings.base_format, base_steps=self.settings.base_steps,
                            margin=self.settings.rule.bar,
                            reference=reference[0] if reference else None,
                            reference_cost=reference[1] if reference else None, accumulated=combined)
        for p, attrs in fail_stale(study):
            study.enqueue_trial(p, user_attrs={**attrs, "rerun": True})
        dists = distributions(param_space(rp.pools))
        budget = self.budget_episodes
        # after round 0 (whose one-change trials leave the sampler room already) the last share of the
        # budget is the sampler's: its recombinations of the pooled entries across slots and anchors
        queued_until = budget * (1.0 - self.s.sampler_share) if k else budget
        # repeats are free but not endless: a tiny space can run out of new genomes. A resumed round
        # has used the asks its trials hold (an interrupted one's rerun stands for it): a round
        # that ended on its asks asks nothing again
        asked = sum(1 for t in study.get_trials(deepcopy=False)
                    if t.state != optuna.trial.TrialState.WAITING and not t.user_attrs.get("interrupted"))
        asks_left = math.ceil(3 * self.s.trials_per_round / share) - asked
        with progress_line(f"round {k}", budget) as bar:
            self._batches(k, study, dists, earlier, budget, asks_left, bar, queue=queue, queued_until=queued_until)
        return study

    def _top_up(self, study: optuna.Study, queue: Sequence[Queued], earlier: Collection[str], queued_until: float) -> None:
        """Enqueue the round's next queued trials, a batch at a time, while the paid episodes are
        below ``queued_until``; past it, asks go to the sampler (Optuna serves waiting trials first,
        so the queue is fed lazily rather than all at once). Each enqueued trial carries its place in
        the queue, so a resumed round goes on after the last one enqueued, whenever it was killed."""
        trials = study.get_trials(deepcopy=False)
        if any(t.state == optuna.trial.TrialState.WAITING for t in trials) or paid_episodes(study, earlier) >= queued_until:
            return
        placed = [int(t.user_attrs["queue_index"]) for t in trials if "queue_index" in t.user_attrs]
        # a round with trials but no places was queued whole when it was made (an earlier version)
        done = max(placed) + 1 if placed else len(queue) if any(t.user_attrs.get("origin") for t in trials) else 0
        for i in range(done, min(len(queue), done + self.s.population_size)):
            study.enqueue_trial(queue[i].params, user_attrs={**queue[i].attrs, "queue_index": i})

    def _batches(self, k: int, study: optuna.Study, dists: Any, earlier: Collection[str], budget: int, asks_left: int,
                 bar: Progress, *, queue: Sequence[Queued] = (), queued_until: float = 0.0) -> None:
        while (remaining := budget - paid_episodes(study, earlier)) > 0 and asks_left > 0:
            # new evaluations the rest of the budget buys at full price (a raced proposal costs less)
            size = self.watch.first_batch(min(self.s.population_size, math.ceil(remaining / self.full_episodes), asks_left))
            if not self.watch.may_start(size):
                self.capped = k
                self.echo(f"search.budget_usd={self.s.budget_usd:g} reached in round {k}: ${self.watch.spent():.4f} spent, "
                          "no new trial starts; the search finishes with what it measured (the finish was reserved)")
                break
            trials, specs, settled = self._ask_batch(k, study, dists, paid=size, asks=asks_left, known={*earlier, *eval_keys(study)},
                                                     feed=lambda: self._top_up(study, queue, earlier, queued_until),
                                                     left=lambda: budget - paid_episodes(study, earlier), free=earlier)
            asks_left -= len(trials) + settled
            outcomes = self.racer.run(specs, [anchor_of(t) for t in trials], episodes_left=budget - paid_episodes(study, earlier),
                                      free=earlier, may_spend=self._may_spend)
            for t, spec, out in zip(trials, specs, outcomes):
                self.tell(study, t, spec, out)
            self.watch.note(best_records(study, k), records(study, k), self.quality)
            bar.show(paid_episodes(study, earlier), lambda: study_progress(study, self.quality, self.watch.spent(), self.watch.bar()))
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

    def _may_spend(self, episodes: int) -> bool:
        """Whether the spend cap lets ``episodes`` more start (priced as a share of a full evaluation)."""
        return self.watch.may_start(math.ceil(episodes / self.full_episodes))

    def _ask_batch(self, k: int, study: optuna.Study, dists: Any, *, paid: int, asks: int, known: Collection[str],
                   feed: Callable[[], None] = lambda: None, left: Callable[[], int] = lambda: 0,
                   free: Collection[str] = ()) -> tuple[list[optuna.Trial], list[TrialSpec], int]:
        """Trials asked until ``paid`` of them are new evaluations (or ``asks`` run out), and the
        number of repeats settled on the way. A repeat of a stored evaluation is answered from the
        store, so counting it against the batch would leave workers idle (a batch of six asks is
        often two evaluations), and it is told at once: a trial left running is read back from the
        storage on every later ask, so a space with many repeats would cost its batch O(asks²) reads."""
        trials: list[optuna.Trial] = []
        specs: list[TrialSpec] = []
        new: set[str] = set()
        settled = pending = 0
        # a genome asked again before its evaluation has run can only wait for it, running: past
        # ``paid`` such asks the sampler is going round in a small space, and the batch goes with what it has
        while len(new) < paid and len(trials) + settled < asks and pending <= paid:
            feed()  # the queue first, while its share of the budget lasts
            t = study.ask(dists)
            # enqueued trials have every param fixed, and Optuna then never consults the sampler,
            # so NSGA-II would not count them in a generation (nor use them as parents)
            _ = t.relative_params
            seed = self.settings.seed + CONTROL_SEED_STRIDE * (k + 1) if t.user_attrs.get("control") else None
            spec = self.evaluations.spec(params_to_genome(t.params), "train", f"r{k}-t{t.number}", seed=seed)
            key = spec.eval_key(self.evaluations.variant_of(spec.genome).content_hash)
            if key in known:  # nothing to launch: read from the store now, as the batch would
                [out] = self.racer.run([spec], [anchor_of(t)], episodes_left=left(), free=free, may_spend=self._may_spend)
                self.tell(study, t, spec, out)
                settled += 1
                continue
            pending += key in new
            new.add(key)
            trials.append(t)
            specs.append(spec)
        return trials, specs, settled

    def tell(self, study: optuna.Study, trial: optuna.Trial, spec: TrialSpec, out: Outcome | TrialResult | BaseException) -> None:
        if not isinstance(out, Outcome):  # a result evaluated outside a race (a caller's own)
            held = {} if isinstance(out, BaseException) else {spec.eval_key(out.variant_hash): len(spec.task_ids) * spec.samples}
            out = Outcome(out, held)
        res = out.result
        trial.set_user_attr("genome", spec.genome.to_dict())
        trial.set_user_attr("authors", list(authors(spec.genome, spec.pools, self.settings.step_names)))
        trial.set_user_attr("episodes", dict(out.episodes))
        if out.race is not None:
            trial.set_user_attr("race", out.race.to_dict())
        if res is None:  # raced out: NSGA-II leaves pruned trials out, so the front never holds partial evidence
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return
        if isinstance(res, BaseException):
            trial.set_user_attr("error", f"{type(res).__name__}: {res}"[:500])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        self.evaluations.remember(spec.genome, res.variant)
        metrics = dict(res.report.metrics)
        criteria, objectives = self.settings.criteria, self.objectives
        values = objective_values(res.report, criteria, objectives)
        trial.set_user_attr("variant_hash", res.variant_hash)
        trial.set_user_attr("eval_key", spec.eval_key(res.variant_hash))
        trial.set_user_attr("train", metrics)
        if any(v is None for v in values):
            missing = [o.metric for o, v in zip(objectives, values) if v is None]
            why = ("no scored episode: every episode was skipped as an infrastructure failure" if not metrics.get("scored")
                   else f"objective metric(s) {missing} could not be measured on this report")
            trial.set_user_attr("error", why)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        if out.estimate is not None:  # a race measured the quality on more paired tasks: the objective is that estimate
            values = tuple(out.estimate if o.metric == self.quality else v for o, v in zip(objectives, values))
            trial.set_user_attr("estimate", {"metric": self.quality, "value": out.estimate})
        verdict = evaluate_criteria(res.report, criteria, self.settings.aggregation)
        # Hard criteria are Optuna constraints (<= 0 feasible): NSGA-II ranks and best_trials filter by them.
        for c, value in zip([c for c in criteria if c.hard], constraint_values(verdict)):
            trial.set_constraint(c.name, value)
        trial.set_user_attr("feasible", verdict.feasible)
        study.tell(trial, values=[float(v) for v in values if v is not None])
