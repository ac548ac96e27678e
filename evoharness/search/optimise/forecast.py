"""The search's spend, forecast before the baseline is paid for: the incumbent's cost per task from
its route's price and the tokens of the requests it is expected to send (search/evaluation/
projection.py: the tools' answers are left out, so it is usually low, about half the true cost on
the simulator), the baseline's train evaluation at that cost, and what the finish (dev runs, the
holdout claim) costs after it if every member cost as much. A cap below the baseline's forecast is
refused before anything is paid for (search/cli/spend_checks.py)."""
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
    finish: float  # the dev runs and the holdout claim after it, at the baseline's cost per task
    search: float  # the whole search, every evaluation at per_task
    escalates: bool = False  # the incumbent hands troubled turns to another route: those calls are above the floor

    @property
    def minimum(self) -> float:
        """What a capped search is likely to need to reach a decision (still an estimate, usually low)."""
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
                                      dev_members=s.max_front_dev, references=references, samples=s.samples),
                    escalates=variant.escalation is not None)


def forecast_line(f: Forecast | None, settings: RunSettings, train_tasks: int) -> str:
    s = settings.search
    if f is None:
        return "projected spend: unknown, the incumbent's route has no price (see the unpriced cost in the baseline's metrics)"
    cap = f"; search.budget_usd={s.budget_usd:g} caps it" if s.budget_usd is not None else ""
    # a floor prices the calls a task's solution needs on the variant's own route: a turn is handed
    # over only on trouble, which a solved task does not have, so handed-over calls are never in it
    left_out = "tool results and escalated calls" if f.escalates else "tool results"
    return (f"projected spend before the baseline (prices x the rendered prompt's tokens x the reference solutions' calls, "
            f"{left_out} left out, so usually low): the baseline about ${f.baseline:.4f} ({train_tasks} train tasks x "
            f"{s.samples} sample(s), {f.calls} calls per sample, ${f.per_task:.4f} per task), then about ${f.finish:.4f} for "
            "dev and the holdout; "
            f"the whole search about ${f.search:.2f} if every evaluation cost that per task{cap}")
