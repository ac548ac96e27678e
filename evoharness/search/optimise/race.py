"""Racing a proposal against its anchor: the pure decision rule. No I/O.

A proposal (a new pool entry tried on the front member it was built for) is evaluated on the same
train tasks and seeds as its anchor, whose stored full-train evaluation supplies the other side of
every pair: the same task, sample and seed give the same episode seed, so the pairing is exact.
The proposal runs a block of tasks at a time (``plan``: e.g. 10, 20, then the whole 40), and after
each block ``judge`` reads the paired difference (proposal minus anchor, each task's samples
averaged, the workload's clusters as the unit: stats.quality_test, the claim's own interval):

- ``rejected`` (stop, before the whole split): the interval's upper end is below 0 (clearly worse),
  or, once at least half the split and at least ``FUTILE_AFTER`` tasks have run (the second block
  of the default 10, 20, 40), the mean difference is 0 or below (futile: an edit that has not moved quality up on half the split rarely
  turns out to be the edit worth combining, and the tasks it would still cost buy another proposal);
- ``continue``: neither, before the whole split;
- at the whole split: ``accepted`` when the interval's lower end is above 0, else ``undecided``.

A proposal ahead of its anchor but undecided on the whole split (``promising``) runs on, on the
train tasks beyond the search's (``extension``), with its anchor on the same ones, judged by the
same rule; it is then ranked by ``estimate``.

A proposal that is clearly cheaper per task than its anchor (``CHEAPER``) is never rejected on
quality: it may be a trade-off the front wants, and only the whole split can place it. One that
saves less but still some (``SAVES``: a clip, a window) is not futile for a tie: equal quality at
a lower cost is what a cost lever is for, so only a mean difference below 0 (or a clearly worse
interval) races it out.
bench/racing.py measures the rule's error rates by Monte-Carlo.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from evoharness.search.evaluation.stats import quality_test

RaceDecision = Literal["rejected", "continue", "accepted", "undecided"]
MIN_FIRST_BLOCK = 10  # fewer tasks than this make the first look's interval too wide to stop anything
MIN_GROWTH = 2.0  # the error rates bench/racing.py measured are at growth 2: slower growth means more looks, more false rejects
FUTILE_AFTER = 2 * MIN_FIRST_BLOCK  # on 10 tasks the futility rule loses a +0.10 edit 22% of the time (bench/racing.py)
CHEAPER = 0.10  # a proposal at least this share cheaper per task than its anchor is a trade-off, not raced out
SAVES = 0.02  # a proposal at least this share cheaper is not futile for a tie (cost per task on the same tasks: little noise)


@dataclass(frozen=True)
class RaceSettings:
    """``search.race``: whether proposals race, the first block's tasks and how blocks grow, and
    how many train tasks a promising proposal may run in all (``max_tasks``: None for the whole
    train split; at most the search's train tasks for no extension)."""

    enabled: bool = True
    first_block: int = 10
    growth: float = 2.0
    max_tasks: int | None = 120


def extension(n_train: int, n_reserve: int, *, growth: float, max_tasks: int | None, enabled: bool = True) -> tuple[int, ...]:
    """The cumulative reserve tasks after each extension block: the train tasks beyond the search's
    ``n_train`` a promising proposal runs next, paired with its anchor on the same ones, growing as
    the blocks before did, up to ``max_tasks`` in all (e.g. (40, 80) for 40 train tasks, 200 in
    reserve and 120 at most). Empty when racing is off or nothing is in reserve."""
    total = n_train + n_reserve if max_tasks is None else min(max_tasks, n_train + n_reserve)
    if not enabled or total <= n_train:
        return ()
    cumulative = [n_train]
    while cumulative[-1] < total:
        cumulative.append(min(total, max(cumulative[-1] + 1, math.ceil(cumulative[-1] * growth))))
    if len(cumulative) > 2 and cumulative[-1] - cumulative[-2] < (cumulative[-2] - cumulative[-3]) / 2:
        cumulative.pop(-2)  # a last block of a few tasks settles nothing: it joins the one before
    return tuple(c - n_train for c in cumulative[1:])


def promising(step: RaceStep) -> bool:
    """Whether a proposal that ran the whole train split undecided earns an extension: it is ahead
    of its anchor there. A tie or a loss on the whole split is no reason to pay for more tasks."""
    return step.decision == "undecided" and step.mean_diff > 0


def estimate(anchor_quality: float, anchor: Sequence[float] | np.ndarray, proposal: Sequence[float] | np.ndarray) -> float:
    """A raced proposal's train quality, as its anchor's on the search's train tasks plus the mean
    paired difference over every task the race ran (each task's samples averaged). With no
    extension this is the proposal's own train quality; with one, its gain is read from two or
    three times the tasks, so a variant that was lucky on the train tasks does not outrank one
    that is better."""
    a, b = np.asarray(anchor, dtype=float), np.asarray(proposal, dtype=float)
    return float(anchor_quality + (b - a).mean()) if a.size else float(anchor_quality)


def plan(n_tasks: int, *, first_block: int, growth: float, enabled: bool = True) -> tuple[int, ...]:
    """The cumulative task counts after each block: (10, 20, 40) for 40 tasks, a first block of 10 and
    growth 2. One block (the whole split) when racing is off or the split is no larger than a block.
    A last block smaller than half the one before joins it: a few tasks more settle nothing."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks={n_tasks}: a race needs tasks")
    if not enabled or n_tasks <= first_block:
        return (n_tasks,)
    sizes = [first_block]
    while sizes[-1] < n_tasks:
        sizes.append(min(n_tasks, max(sizes[-1] + 1, math.ceil(sizes[-1] * growth))))
    if len(sizes) > 2 and sizes[-1] - sizes[-2] < (sizes[-2] - sizes[-3]) / 2:
        sizes.pop(-2)
    return tuple(sizes)


@dataclass(frozen=True)
class RaceStep:
    """The evidence after one block and what it decided."""

    decision: RaceDecision
    tasks: int  # paired tasks so far
    clusters: int
    mean_diff: float  # proposal minus anchor
    low: float
    high: float
    cheaper: bool  # clearly cheaper per task than the anchor on these tasks
    saves: bool = False  # cheaper by at least SAVES on these tasks: a tie is not futility

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RaceStep:
        return cls(decision=d["decision"], tasks=int(d["tasks"]), clusters=int(d["clusters"]), mean_diff=float(d["mean_diff"]),
                   low=float(d["low"]), high=float(d["high"]), cheaper=bool(d["cheaper"]), saves=bool(d.get("saves", False)))


def judge(anchor: Sequence[float] | np.ndarray, proposal: Sequence[float] | np.ndarray, *, clusters: Sequence[str] | None,
          ran: int, of: int, confidence: float, cheaper: bool = False, saves: bool = False) -> RaceStep:
    """The decision once ``ran`` of the split's ``of`` tasks have run, from the per-task quality of
    each side on the paired ones (in one order; a task skipped on the infrastructure drops out)."""
    test = quality_test(anchor, proposal, null=0.0, clusters=clusters, confidence=confidence)
    decision: RaceDecision
    if ran >= of:
        decision = "accepted" if test.low > 0 else "undecided"
    # futility counts paired tasks, not planned ones: a task skipped on the infrastructure is no evidence;
    # a tie on half the split is futility on purpose: an edit that changed nothing there is not worth the rest
    elif not cheaper and (test.high < 0 or (2 * test.n >= of and test.n >= FUTILE_AFTER
                                            and (test.mean_diff < 0 if saves else test.mean_diff <= 0))):
        decision = "rejected"
    else:
        decision = "continue"
    return RaceStep(decision=decision, tasks=test.n, clusters=test.clusters, mean_diff=test.mean_diff, low=test.low,
                    high=test.high, cheaper=cheaper, saves=saves)


def is_cheaper(anchor_cost: float | None, proposal_cost: float | None, *, share: float = CHEAPER) -> bool:
    """Whether the proposal's mean cost per task is at least ``share`` below the anchor's (unknown: no)."""
    if anchor_cost is None or proposal_cost is None or not (math.isfinite(anchor_cost) and math.isfinite(proposal_cost)):
        return False
    return proposal_cost <= anchor_cost * (1.0 - share) and proposal_cost < anchor_cost
