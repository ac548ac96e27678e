"""The search's spend cap (``search.budget_usd``): what has been spent, what the next batch and the
finish will cost, and whether new paid work may start. Pure but for reading the spend journal.

Spend is what the study's spend journal holds: every paid evaluation, and the LLM mutators' and
the teacher's calls (answers from the response cache cost nothing). The finish (the dev runs and
the holdout claim) is reserved before the cap is reached, so a capped search still ends with a
decision: the rounds stop when the next batch plus the finish would cross the cap. A batch is
estimated at the dearest train evaluation paid so far, the finish from the front's train cost per
task: a cap is an upper bound, so both err high. Under a cap the first batch is the
baseline alone, which always runs; the LLM mutators run between rounds only while a batch could.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.search.optimise.settings import RunSettings
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.records.spend import read_spend


def spent(journal: Path) -> float:
    # a null cost (an unpriced route) adds nothing: a search under a cap refuses such routes before it starts
    return sum(float(r.get("cost_usd") or 0.0) for r in read_spend(journal)) if journal.exists() else 0.0


@dataclass(frozen=True)
class Estimate:
    per_train_eval: float  # the dearest train evaluation paid so far (USD)
    finish: float  # the dev runs and the holdout claim, projected (USD)


def estimate(rows: Sequence[Mapping[str, Any]], *, front_costs: Sequence[float], baseline_cost: float, tasks: Mapping[str, int],
             dev_members: int, references: int, samples: int = 1, extra_dev: int = 2) -> Estimate | None:
    """None before any train evaluation was paid. The finish runs the baseline, at most
    ``dev_members`` front members (bounded by the dearest) and a named reference on dev, then the
    champion (at most the dearest member) and the references on the holdout; costs per task are
    the members' train costs. ``references``: 1 (the incumbent) or 2 (with a named reference,
    bounded by the dearest member). Every run is costed at ``samples`` samples per task (repeats
    that turn out identical are skipped, but that is not known in advance), and ``extra_dev`` more
    dev runs at the dearest cost are reserved for the champion's ablation."""
    train = [float(r["cost_usd"]) for r in rows if r.get("split") == "train" and r.get("cost_usd") is not None]
    if not train:
        return None
    dearest = sorted(front_costs, reverse=True) or [max(train) / max(1, tasks["train"])]
    extra = (references - 1) * dearest[0]
    dev = baseline_cost + sum(dearest[:dev_members]) + extra + extra_dev * dearest[0]
    holdout = dearest[0] + baseline_cost + extra
    return Estimate(per_train_eval=max(train), finish=samples * (dev * tasks["dev"] + holdout * tasks["holdout"]))


def may_start(cap: float | None, *, spent_usd: float, batch: int, est: Estimate | None) -> bool:
    """Whether a batch of ``batch`` train evaluations may start under the cap."""
    if cap is None or est is None:
        return True
    return spent_usd + batch * est.per_train_eval + est.finish <= cap


def projection(baseline_cost: float, *, tasks: Mapping[str, int], rounds: int, per_round: int, dev_members: int,
               references: int, samples: int = 1) -> float:
    """The whole search's spend if every evaluation cost what the baseline's did per task: the
    number to expect before the search knows what its candidates cost."""
    evaluations = rounds * per_round * tasks["train"] + (dev_members + references) * tasks["dev"] + (1 + references) * tasks["holdout"]
    return baseline_cost * evaluations * samples


class SpendWatch:
    """A search's spend as it runs: what the journal holds, what the baseline and the front cost per
    task (the finish's estimate, from the costliest front seen in any round), the projection printed
    once, and the cap's verdict."""

    def __init__(self, settings: RunSettings, journal: Path, *, tasks: Mapping[str, int], echo: Callable[[str], None]) -> None:
        self.s, self.journal, self.tasks, self.echo = settings.search, journal, dict(tasks), echo
        self.margin = settings.rule.bar
        self.references = 2 if settings.reference not in (None, "incumbent") else 1
        self.baseline_cost: float = 0.0
        self.front_costs: list[float] = []
        self.baseline_q: float | None = None
        self.projected: float | None = None  # the projection printed once the baseline's cost is known

    def spent(self) -> float:
        return spent(self.journal)

    def note(self, front: Sequence[TrialRecord], done: Sequence[TrialRecord], quality: str) -> None:
        """After a batch: the round's front and baseline, then the projection once the baseline is known."""
        # every round's front can reach the finish (the front over all rounds): keep the dearest seen
        self.front_costs = sorted({*self.front_costs, *(float(t.train.get("cost_per_task", 0.0)) for t in front)}, reverse=True)
        baseline = next((r for r in done if r.origin == "baseline" and r.train), None)
        if baseline is not None:
            self.baseline_q, self.baseline_cost = baseline.quality(quality), float(baseline.train.get("cost_per_task", 0.0))
        if self.projected is None and self.baseline_cost:
            total = self.projected = projection(self.baseline_cost, tasks=self.tasks, rounds=self.s.rounds,
                                                per_round=self.s.trials_per_round, dev_members=self.s.max_front_dev,
                                                references=self.references, samples=self.s.samples)
            cap = f"; search.budget_usd={self.s.budget_usd:g} caps it" if self.s.budget_usd is not None else ""
            self.echo(f"projected spend: at most about ${total:.2f}, every evaluation at the baseline's ${self.baseline_cost:.4f} "
                      f"per task and {self.s.samples} sample(s) ({self.s.rounds} rounds x {self.s.trials_per_round} paid train "
                      f"evaluations, then dev and holdout; cheaper models and skipped identical repeats cost less){cap}")

    def estimate(self) -> Estimate | None:
        rows = read_spend(self.journal) if self.journal.exists() else []
        return estimate(rows, front_costs=self.front_costs, baseline_cost=self.baseline_cost, tasks=self.tasks,
                        dev_members=self.s.max_front_dev, references=self.references, samples=self.s.samples)

    def first_batch(self, size: int) -> int:
        """Under a cap, the first batch is the baseline alone: nothing is known about cost before it."""
        return 1 if self.s.budget_usd is not None and self.estimate() is None else size

    def may_start(self, batch: int) -> bool:
        return self.s.budget_usd is None or may_start(self.s.budget_usd, spent_usd=self.spent(), batch=batch, est=self.estimate())

    def bar(self) -> float | None:
        """The train quality a cheap member must reach to qualify (the baseline's less the margin)."""
        return None if self.margin is None or self.baseline_q is None else self.baseline_q - self.margin
