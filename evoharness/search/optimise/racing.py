"""A batch's evaluations, with each proposal raced against its anchor (race.py holds the rule).

A trial that is not a proposal, or whose anchor has no stored full-train evaluation to pair with,
is evaluated on the whole train split in one job, as before. A proposal runs the blocks of
``race.plan`` one launch at a time: each block is an evaluation of its own task ids (stored under
its own key, so a resume reads it back and never pays it twice), judged with the blocks before it
against the anchor's stored per-task results. A proposal raced out ends there; one that reaches
the whole split has its blocks merged into one full-train evaluation, stored under the full
split's key like any other, so its objectives compare with every other trial's and a later round
reads it for free. Each outcome names the evaluations it paid for or read, with their episodes,
for the round's budget (study.episode_keys).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evoharness.compiler.atomic import write_json_atomic
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import EvalReport, aggregate, paired_clusters, paired_scores
from evoharness.search.genome import Genome
from evoharness.search.optimise.evaluations import Evaluations
from evoharness.search.optimise.race import SAVES, RaceSettings, RaceStep, estimate, extension, is_cheaper, judge, plan, promising
from evoharness.search.optimise.study import least_counts
from evoharness.search.optimise.trial import TrialResult, TrialSpec, stored_result
from evoharness.search.records import transcripts


@dataclass(frozen=True)
class RaceRecord:
    """A proposal's paired evidence against its anchor (the trial's ``race`` user attribute)."""

    decision: str  # accepted | rejected | undecided
    tasks: int  # train tasks the proposal ran (paired)
    of: int  # tasks in the train split
    mean_diff: float  # proposal minus anchor on those tasks, clusters as the unit
    low: float
    high: float
    clusters: int
    steps: tuple[RaceStep, ...]
    anchor_key: str  # the anchor's stored evaluation
    extended: int = 0  # train tasks beyond the search's that the race ran (a promising proposal's extension)
    estimate: float | None = None  # the quality the search ranks the proposal by, when extended (race.estimate)
    stopped: str = ""  # why an extension ended before its plan: "round budget" or "spend cap"

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "tasks": self.tasks, "of": self.of, "mean_diff": self.mean_diff, "low": self.low,
                "high": self.high, "clusters": self.clusters, "steps": [s.to_dict() for s in self.steps], "anchor_key": self.anchor_key,
                "extended": self.extended, "estimate": self.estimate, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RaceRecord:
        return cls(decision=str(d["decision"]), tasks=int(d["tasks"]), of=int(d["of"]), mean_diff=float(d["mean_diff"]),
                   low=float(d["low"]), high=float(d["high"]), clusters=int(d["clusters"]),
                   steps=tuple(RaceStep.from_dict(s) for s in d.get("steps", ())), anchor_key=str(d["anchor_key"]),
                   extended=int(d.get("extended", 0)), estimate=None if d.get("estimate") is None else float(d["estimate"]),
                   stopped=str(d.get("stopped", "")))


@dataclass(frozen=True)
class Outcome:
    """A trial's evaluation: the result (None when raced out, the exception when it failed), the
    full-train key it stands for, the evaluations it paid for or read with their episodes, and the
    race record of a proposal."""

    result: TrialResult | BaseException | None
    episodes: Mapping[str, int]
    race: RaceRecord | None = None
    estimate: float | None = None  # the quality objective's value, when a race measured it on more tasks than the result's


def merged(chunks: Sequence[TrialResult], label: str) -> TrialResult:
    """Block evaluations of one variant as one evaluation of their tasks. The repeats a block did not
    run (identical temperature-0 samples) stand in again as its own aggregate weighed them."""
    first = chunks[0]
    samples = first.report.samples
    episodes = [e for c in chunks for e in c.report.episodes]
    stand_ins = [s for c in chunks for s in _stand_ins(c.report)]
    clusters = {r.task_id: r.cluster for c in chunks for r in c.report.tasks}
    report = aggregate(episodes, variant_hash=first.report.variant_hash, split=first.report.split, samples=samples,
                       stand_ins=stand_ins, clusters=clusters)
    return replace(first, label=label, report=report, evidence=tuple(e for c in chunks for e in c.evidence),
                   reused=all(c.reused for c in chunks), worker=chunks[-1].worker)


def _stand_ins(report: EvalReport) -> list[EpisodeResult]:
    if not report.metrics.get("samples_skipped"):
        return []
    by_task: dict[str, list[EpisodeResult]] = {}
    for e in report.episodes:
        by_task.setdefault(e.task_id, []).append(e)
    return [replace(eps[0], sample=s) for eps in by_task.values() if len(eps) == 1 and eps[0].sample == 0 and eps[0].scored
            for s in range(1, report.samples)]


@dataclass
class _Lane:
    """One trial's evaluation in flight (mutable, inside one batch only)."""

    spec: TrialSpec  # the whole train split
    sizes: tuple[int, ...]  # cumulative tasks after each block
    anchor: EvalReport | None = None
    anchor_key: str = ""
    chunks: list[TrialResult] = field(default_factory=list)
    steps: list[RaceStep] = field(default_factory=list)
    episodes: dict[str, int] = field(default_factory=dict)
    outcome: Outcome | None = None
    anchor_genome: Genome | None = None
    anchor_result: TrialResult | None = None  # the anchor's stored evaluation, read once when the lane began
    reserve: tuple[str, ...] = ()  # train tasks beyond the search's, in order
    more: tuple[int, ...] = ()  # cumulative reserve tasks after each extension block
    whole: TrialResult | None = None  # the proposal on the search's train tasks, once it ran them all
    extra: list[TrialResult] = field(default_factory=list)  # the proposal's extension blocks
    anchor_extra: list[TrialResult] = field(default_factory=list)  # the anchor's, on the same tasks

    def block(self, j: int) -> TrialSpec:
        if len(self.sizes) == 1:
            return self.spec
        lo = self.sizes[j - 1] if j else 0
        return replace(self.spec, task_ids=self.spec.task_ids[lo:self.sizes[j]], label=f"{self.spec.label}-b{j}")

    def extension_jobs(self, e: int) -> list[TrialSpec]:
        """The proposal and its anchor on the ``e``-th extension block's reserve tasks: the anchor's
        is the same job for every proposal on that anchor (evaluated once, stored, read after)."""
        assert self.anchor_genome is not None
        ids = self.reserve[(self.more[e - 1] if e else 0):self.more[e]]
        return [replace(self.spec, task_ids=ids, label=f"{self.spec.label}-x{e}"),
                replace(self.spec, genome=self.anchor_genome, task_ids=ids, label=f"anchor-x{e}")]


class Racer:
    """Runs a batch's trials: full evaluations in one launch, proposals block by block, every
    lane's next job in the same launch."""

    def __init__(self, evaluations: Evaluations, *, race: RaceSettings, quality: str, cost: bool, confidence: float,
                 reserve: Sequence[str] = ()) -> None:
        self.evaluations, self.race, self.quality, self.cost, self.confidence = evaluations, race, quality, cost, confidence
        self.reserve = tuple(reserve)

    def first_share(self, n_tasks: int) -> float:
        """The least share of a full evaluation a proposal can cost (its first block)."""
        sizes = plan(n_tasks, first_block=self.race.first_block, growth=self.race.growth, enabled=self.race.enabled)
        return sizes[0] / n_tasks

    def run(self, specs: Sequence[TrialSpec], anchors: Sequence[Genome | None], *, episodes_left: int | None = None,
            free: Collection[str] = (), may_spend: Callable[[int], bool] = lambda episodes: True) -> list[Outcome]:
        """The batch's outcomes. A promising proposal's extension runs beyond the full-price
        evaluations the batch was sized for, so each extension block is held to what is left:
        one that must be launched (a stored one is read for free) starts only while the batch's new
        episodes (``free`` keys are evaluations earlier rounds paid for) stay within
        ``episodes_left`` and ``may_spend`` (the spend cap) allows its episodes; else the proposal
        keeps the evidence it has, and its record says why."""
        lanes = [self._lane(spec, anchor) for spec, anchor in zip(specs, anchors)]
        pending: dict[int, list[TrialSpec]] = {i: [lane.block(0)] for i, lane in enumerate(lanes)}
        while pending:
            order = list(pending)
            jobs = [job for i in order for job in pending[i]]
            results = iter(self.evaluations.run_jobs(jobs))
            taken = {i: [next(results) for _ in pending[i]] for i in order}
            nexts = {i: self._take(lanes[i], taken[i]) for i in order}  # every lane's results counted before any check
            pending = {}
            committed: dict[str, int] = {}  # the extension jobs this wave starts, by key
            for i in order:
                nxt = nexts[i]
                if nxt and lanes[i].whole is not None:
                    paid = _paid(lanes, free)
                    cost = {k: n for k, n in self._keyed(nxt).items() if k not in free and k not in paid and k not in committed}
                    # the other lanes' blocks still to run on the search's train tasks were bought with the batch
                    spent = sum(paid.values()) + sum(committed.values()) + sum(_unrun(lane) for lane in lanes)
                    over = bool(cost) and episodes_left is not None and spent + sum(cost.values()) > episodes_left
                    if over or (cost and not may_spend(sum(committed.values()) + sum(cost.values()))):  # a stored block is free
                        self._end_extension(lanes[i], stopped="round budget" if over else "spend cap")
                        continue
                    committed.update(cost)
                if nxt:
                    pending[i] = nxt
        return [lane.outcome for lane in lanes if lane.outcome is not None]

    def _keyed(self, jobs: Sequence[TrialSpec]) -> dict[str, int]:
        """The jobs that would be launched (not read from the study's store), with their episodes."""
        keys = {job.eval_key(self.evaluations.variant_of(job.genome).content_hash): len(job.task_ids) * job.samples for job in jobs}
        return {k: n for k, n in keys.items() if not (self.evaluations.paths.evals / f"{k}.json").exists()}

    def _lane(self, spec: TrialSpec, anchor: Genome | None) -> _Lane:
        n = len(spec.task_ids)
        if anchor is None:
            return _Lane(spec, (n,))
        ev = self.evaluations
        anchor_spec = replace(spec, genome=anchor, label="anchor")
        variant = ev.variant_of(anchor)
        anchor_key = anchor_spec.eval_key(variant.content_hash)
        stored = stored_result(ev.paths.evals / f"{anchor_key}.json", variant)
        if stored is None:  # nothing to pair with: evaluated in full, with no race record
            return _Lane(spec, (n,))
        own = ev.paths.evals / f"{spec.eval_key(ev.variant_of(spec.genome).content_hash)}.json"
        sizes = (n,) if own.exists() else plan(n, first_block=self.race.first_block, growth=self.race.growth,
                                                 enabled=self.race.enabled)
        more = extension(n, len(self.reserve), growth=self.race.growth, max_tasks=self.race.max_tasks, enabled=self.race.enabled)
        return _Lane(spec, sizes, anchor=stored.report, anchor_key=anchor_key, anchor_genome=anchor, anchor_result=stored,
                     reserve=self.reserve, more=more)

    def _estimate_path(self, full_key: str) -> Any:
        return self.evaluations.paths.estimates / f"{full_key}.json"

    def _take(self, lane: _Lane, results: list[TrialResult | BaseException]) -> list[TrialSpec]:
        if lane.whole is not None:
            return self._take_extension(lane, results)
        [res] = results
        j = len(lane.chunks)
        block = lane.block(j)
        episodes = len(block.task_ids) * block.samples
        if not isinstance(res, TrialResult):
            lane.episodes[f"failed:{block.label}"] = episodes
            lane.outcome = Outcome(res, dict(lane.episodes))
            return []
        lane.episodes[block.eval_key(res.variant_hash)] = episodes
        lane.chunks.append(res)
        if lane.anchor is None:
            lane.outcome = Outcome(res, dict(lane.episodes), estimate=self._stored_estimate(block.eval_key(res.variant_hash)))
            return []
        so_far = merged(lane.chunks, lane.spec.label) if len(lane.chunks) > 1 else replace(res, label=lane.spec.label)
        step = self._judge(lane.anchor, so_far.report, ran=lane.sizes[j], of=lane.sizes[-1])
        lane.steps.append(step)
        if step.decision == "continue":
            return [lane.block(j + 1)]
        record = self._record(lane, step)
        if step.decision == "rejected":
            lane.outcome = Outcome(None, dict(lane.episodes), record)
            return []
        if len(lane.chunks) > 1:
            full_key = lane.spec.eval_key(res.variant_hash)
            if not so_far.report.metrics.get("skipped"):  # as run_jobs: an evaluation with skipped episodes is not final
                evals = self.evaluations.paths.evals
                # the blocks' transcripts, from their sidecars: a block read back from the store has none in memory
                blocks = [transcripts.sidecar(evals / f"{lane.block(b).eval_key(res.variant_hash)}.json") for b in range(len(lane.chunks))]
                if all(p.exists() for p in blocks):  # a block stored by an older evoharness has none: then neither has the whole
                    transcripts.write(evals / f"{full_key}.json", transcripts.concatenated([p.read_bytes() for p in blocks]))
                write_json_atomic(evals / f"{full_key}.json", so_far.to_dict())
            lane.episodes[full_key] = 0  # its blocks paid for it: reading it again in this round is free
        if lane.more and promising(step):  # ahead of its anchor, undecided: more paired tasks, beyond the search's
            lane.whole = so_far
            return lane.extension_jobs(0)
        lane.outcome = Outcome(so_far, dict(lane.episodes), record)
        return []

    def _take_extension(self, lane: _Lane, results: list[TrialResult | BaseException]) -> list[TrialSpec]:
        """One extension block's two results (the proposal's, the anchor's): judged with everything
        before on the search's train tasks and the reserve ones; the proposal's result stays its
        evaluation on the search's train tasks (what every trial's objectives are measured on),
        and its quality objective becomes the estimate from all the paired tasks."""
        assert lane.whole is not None and lane.anchor is not None
        e = len(lane.extra)
        jobs = lane.extension_jobs(e)
        for job, res in zip(jobs, results):
            n = len(job.task_ids) * job.samples
            if not isinstance(res, TrialResult):
                lane.episodes[f"failed:{job.label}"] = n
            else:
                lane.episodes[job.eval_key(res.variant_hash)] = n
        mine, theirs = results
        if not isinstance(mine, TrialResult) or not isinstance(theirs, TrialResult):
            # the extension could not be measured: the proposal keeps what its whole train split said
            lane.outcome = Outcome(lane.whole, dict(lane.episodes), self._record(lane, lane.steps[-1]))
            return []
        lane.extra.append(mine)
        lane.anchor_extra.append(theirs)
        n_train = len(lane.spec.task_ids)
        assert lane.anchor_result is not None
        anchor_all = merged([lane.anchor_result, *lane.anchor_extra], "anchor").report
        mine_all = merged([lane.whole, *lane.extra], lane.spec.label).report
        step = self._judge(anchor_all, mine_all, ran=n_train + lane.more[e], of=n_train + lane.more[-1])
        lane.steps.append(step)
        if step.decision == "continue":
            return lane.extension_jobs(e + 1)
        self._end_extension(lane)
        return []

    def _end_extension(self, lane: _Lane, *, stopped: str = "") -> None:
        """The proposal's outcome from every paired task it ran: with no extension block run, what
        its whole train split said; else ranked by the estimate from all of them. ``stopped``: why
        the extension ended before its plan did."""
        assert lane.whole is not None and lane.anchor is not None and lane.anchor_result is not None
        step, e = lane.steps[-1], len(lane.extra)
        if step.decision == "continue":  # stopped before its evidence decided
            step = replace(step, decision="undecided")
        if not e:
            lane.outcome = Outcome(lane.whole, dict(lane.episodes),
                                   self._record(lane, step, planned=lane.more[-1] if stopped else 0, stopped=stopped))
            return
        anchor_all = merged([lane.anchor_result, *lane.anchor_extra], "anchor").report
        mine_all = merged([lane.whole, *lane.extra], lane.spec.label).report
        _, a, b = paired_scores(anchor_all, mine_all, metric=self.quality)
        value = estimate(float(lane.anchor.metrics.get(self.quality, 0.0)), a, b)
        record = self._record(lane, step, extended=lane.more[e - 1], planned=lane.more[-1], estimate=value, stopped=stopped)
        full_key = lane.spec.eval_key(lane.whole.variant_hash)
        # kept beside the evaluation: a later trial that reads the same evaluation (a front re-read,
        # a repeat) is ranked by the same estimate, not by the luck of the search's train tasks
        write_json_atomic(self._estimate_path(full_key), {"metric": self.quality, "estimate": value, "tasks": step.tasks})
        lane.outcome = Outcome(lane.whole, dict(lane.episodes), record, estimate=value)

    def _stored_estimate(self, full_key: str) -> float | None:
        path = self._estimate_path(full_key)
        if not path.exists():
            return None
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            return float(d["estimate"]) if d.get("metric") == self.quality else None
        except (OSError, ValueError, KeyError, TypeError):  # a damaged estimate is ignored: the evaluation itself stands
            return None

    @staticmethod
    def _record(lane: _Lane, step: RaceStep, *, extended: int = 0, planned: int = 0, estimate: float | None = None,
                stopped: str = "") -> RaceRecord:
        return RaceRecord(decision=step.decision, tasks=step.tasks, of=len(lane.spec.task_ids) + planned, mean_diff=step.mean_diff,
                          low=step.low, high=step.high, clusters=step.clusters, steps=tuple(lane.steps), anchor_key=lane.anchor_key,
                          extended=extended, estimate=estimate, stopped=stopped)

    def _judge(self, anchor: EvalReport, proposal: EvalReport, *, ran: int, of: int) -> RaceStep:
        tasks, a, b = paired_scores(anchor, proposal, metric=self.quality)
        if not tasks:  # every episode skipped on the infrastructure: no evidence either way
            return RaceStep(decision="undecided" if ran >= of else "continue", tasks=0, clusters=0, mean_diff=0.0, low=-1.0, high=1.0,
                            cheaper=False)
        cheaper = saves = False
        if self.cost:
            _, ca, cb = paired_scores(anchor, proposal, metric="cost_per_task")
            cheaper, saves = is_cheaper(_mean(ca), _mean(cb)), is_cheaper(_mean(ca), _mean(cb), share=SAVES)
        return judge(a, b, clusters=paired_clusters(anchor, proposal), ran=ran, of=of, confidence=self.confidence, cheaper=cheaper,
                     saves=saves)


def _paid(lanes: Sequence[_Lane], free: Collection[str]) -> dict[str, int]:
    """The batch's new episodes so far by key, as the round's budget counts them (study.episode_keys)."""
    return {k: n for k, n in least_counts(lane.episodes for lane in lanes).items() if k not in free}


def _unrun(lane: _Lane) -> int:
    """The episodes of a lane's blocks on the search's train tasks not yet run (at most, if it is not raced out)."""
    if lane.outcome is not None or lane.whole is not None or not lane.chunks:
        return 0
    return (lane.sizes[-1] - lane.sizes[len(lane.chunks) - 1]) * lane.spec.samples


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size and bool(np.isfinite(values).all()) else None

