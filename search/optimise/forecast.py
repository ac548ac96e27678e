"""The search's spend, forecast before the baseline is paid for: the incumbent's cost per task from
its route's price and the tokens of the requests it is expected to send (search/evaluation/
projection.py: a floor, so a cap it refuses is a cap the search would certainly overrun), the
baseline's train evaluation at that cost, and the least the finish (dev runs, the holdout claim)
can cost after it. Below baseline plus finish, a capped search would pay for the baseline and then
stop without a decision: that cap is refused before anything is paid for."""
from __future__ import annotations

from dataclasses import dataclass

from evoharness.compiler.runtime.prices import config_price
from evoharness.compiler.variant import compile_agent
from evoharness.search.evaluation.projection import estimate_evaluation
from evoharness.search.optimise.budget import estimate, projection
from evoharness.search.optimise.freeze import Splits
from evoharness.search.optimise.settings import RunSettings


@dataclass(frozen=True)
class Forecast:
    per_task: float  # the incumbent's floor per task and sample (USD)
    calls: int  # model calls of one sample of the baseline's train tasks
    baseline: float  # the baseline's train evaluation, every sample
    finish: float  # the least the dev runs and the holdout claim cost after it
    search: float  # the whole search, every evaluation at per_task

    @property
    def minimum(self) -> float:
        """The least a capped search must be allowed to reach a decision."""
        return self.baseline + self.finish


def forecast(settings: RunSettings, splits: Splits) -> Forecast | None:
    """None when the incumbent's route has no price (a search that needs one refused it already)."""
    base = settings.models["base"]
    price = config_price(base)
    if price is None:
        return None
    variant = compile_agent(settings.agent, tool=settings.tool, model=base)
    train = [splits.workload.task(t) for t in splits.task_ids["train"]]
    one = estimate_evaluation(variant, train, price)
    s, sizes = settings.search, splits.sizes()
    references = 2 if settings.reference not in (None, "incumbent") else 1
    baseline = one.cost_usd * s.samples
    # the finish as the cap reserves it, with the baseline as the only front member
    est = estimate([{"split": "train", "cost_usd": baseline}], front_costs=[one.per_task], baseline_cost=one.per_task,
                   tasks=sizes, dev_members=s.max_front_dev, references=references, samples=s.samples)
    return Forecast(per_task=one.per_task, calls=one.calls, baseline=baseline, finish=est.finish if est else 0.0,
                    search=projection(one.per_task, tasks=sizes, rounds=s.rounds, per_round=s.trials_per_round,
                                      dev_members=s.max_front_dev, references=references, samples=s.samples))


def forecast_line(f: Forecast | None, settings: RunSettings, train_tasks: int) -> str:
    s = settings.search
    if f is None:
        return "projected spend: unknown, the incumbent's route has no price (see the unpriced cost in the baseline's metrics)"
    cap = f"; search.budget_usd={s.budget_usd:g} caps it" if s.budget_usd is not None else ""
    return (f"projected spend before the baseline (prices x the rendered prompt's tokens x the reference solutions' calls, "
            f"a floor): the baseline at least about ${f.baseline:.4f} ({train_tasks} train tasks x {s.samples} sample(s), "
            f"{f.calls} calls per sample, ${f.per_task:.4f} per task), then at least ${f.finish:.4f} for dev and the holdout; "
            f"the whole search about ${f.search:.2f} if every evaluation cost that per task{cap}")
