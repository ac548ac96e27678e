"""The search's spend cap (``search.budget_usd``): what has been spent, what the next batch and the
finish will cost, and whether new paid work may start. Pure but for reading the spend journal.

Spend is what the study's spend journal holds: every paid evaluation, and the LLM mutators' and
the teacher's calls (answers from the response cache cost nothing). The finish (the dev runs and
the holdout claim) is reserved before the cap is reached, so a capped search still ends with a
decision: the rounds stop when the next batch plus the finish would cross the cap. A batch is
estimated at the dearest train evaluation paid so far, the finish from the front's train cost per
task: a cap is an upper bound, so both err high. The first batch, which measures the baseline,
always runs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search.records.spend import read_spend


def spent(journal: Path) -> float:
    return sum(float(r.get("cost_usd", 0.0)) for r in read_spend(journal)) if journal.exists() else 0.0


@dataclass(frozen=True)
class Estimate:
    per_train_eval: float  # the dearest train evaluation paid so far (USD)
    finish: float  # the dev runs and the holdout claim, projected (USD)


def estimate(rows: Sequence[Mapping[str, Any]], *, front_costs: Sequence[float], baseline_cost: float, tasks: Mapping[str, int],
             dev_members: int, references: int) -> Estimate | None:
    """None before any train evaluation was paid. The finish runs the baseline, at most
    ``dev_members`` front members (bounded by the dearest) and a named reference on dev, then the
    champion (at most the dearest member) and the references on the holdout; costs per task are
    the members' train costs. ``references``: 1 (the incumbent) or 2 (with a named reference,
    bounded by the dearest member)."""
    train = [float(r["cost_usd"]) for r in rows if r.get("split") == "train"]
    if not train:
        return None
    dearest = sorted(front_costs, reverse=True) or [max(train) / max(1, tasks["train"])]
    extra = (references - 1) * dearest[0]
    dev = baseline_cost + sum(dearest[:dev_members]) + extra
    holdout = dearest[0] + baseline_cost + extra
    return Estimate(per_train_eval=max(train), finish=dev * tasks["dev"] + holdout * tasks["holdout"])


def may_start(cap: float | None, *, spent_usd: float, batch: int, est: Estimate | None) -> bool:
    """Whether a batch of ``batch`` train evaluations may start under the cap."""
    if cap is None or est is None:
        return True
    return spent_usd + batch * est.per_train_eval + est.finish <= cap


def projection(baseline_cost: float, *, tasks: Mapping[str, int], rounds: int, per_round: int, dev_members: int,
               references: int) -> float:
    """The whole search's spend if every evaluation cost what the baseline's did per task: the
    number to expect before the search knows what its candidates cost."""
    evaluations = rounds * per_round * tasks["train"] + (dev_members + references) * tasks["dev"] + (1 + references) * tasks["holdout"]
    return baseline_cost * evaluations
