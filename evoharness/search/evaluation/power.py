"""Power before paying: whether the splits can answer the decision rule's question at all.

Two checks, from the split sizes alone (nothing is evaluated):

- **The holdout's reach.** A non-inferiority claim needs the quality interval's low end above
  ``-margin``. With ``K`` clusters that low end is never closer than ``reach(K)`` below the
  observed mean (its value when every cluster ties, stats.reach), so a margin at or below it cannot
  be shown for a candidate that is as good: only one that beats the reference could pass.
- **The dev step.** A pass rate over ``n`` dev tasks with ``s`` samples moves in steps of
  ``1 / (n s)``. A step coarser than the margin means one more failure than the reference already
  falls outside it, so against a strong reference nothing can qualify.

A superiority claim (best_quality) has no margin to bound; its reach is reported, not refused.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evoharness.compiler.runtime.workload import Task
from evoharness.search.evaluation.stats import clusters_needed, reach


@dataclass(frozen=True)
class Power:
    """What the splits can show: the holdout's clusters and reach, and the dev pass rate's step."""

    holdout_tasks: int
    holdout_clusters: int
    reach: float  # the quality interval's smallest distance below its mean with these clusters
    dev_tasks: int
    samples: int
    dev_step: float  # 0.0 for a continuous quality metric
    margin: float | None  # None: a superiority rule, nothing to bound
    clusters_needed: int | None

    @property
    def holdout_short(self) -> bool:
        return self.margin is not None and self.reach >= self.margin

    @property
    def dev_coarse(self) -> bool:
        return self.margin is not None and self.dev_step > self.margin + 1e-12

    def problems(self) -> list[tuple[str, str]]:
        """(what is wrong, the fix) for each check that fails."""
        out: list[tuple[str, str]] = []
        if self.holdout_short:
            assert self.margin is not None
            per = self.holdout_tasks / max(self.holdout_clusters, 1)
            unit = f"{self.holdout_clusters} clusters ({self.holdout_tasks} tasks)" if per > 1 else f"{self.holdout_tasks} tasks"
            wider = f"set criteria.margin={math.ceil(self.reach * 100 + 1e-9) / 100:g} or wider"
            if self.clusters_needed is None:  # a margin of 0: no finite holdout bounds it
                fix = f"no holdout size can show it; {wider}"
            else:
                more = (f"{self.clusters_needed} clusters (about {math.ceil(self.clusters_needed * per)} tasks)" if per > 1
                        else f"{self.clusters_needed} tasks")
                fix = f"give the holdout at least {more}, or {wider}"
            out.append((f"the holdout's {unit} cannot show non-inferiority within {self.margin:g}: with every cluster tied the "
                        f"interval still reaches {self.reach:.3f} below", fix))
        if self.dev_coarse and self.margin:
            tasks = math.ceil(1.0 / (self.margin * self.samples) - 1e-9)
            out.append((f"the dev split's {self.dev_tasks} tasks x {self.samples} samples move the pass rate in steps of "
                        f"{self.dev_step:.3f}, coarser than the margin {self.margin:g}, so one more failure than the reference "
                        "is already outside it", f"give dev at least {tasks} tasks, or raise search.samples"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def power(*, holdout_tasks: int, holdout_clusters: int, dev_tasks: int, samples: int, margin: float | None, confidence: float,
          metric: str = "pass_rate") -> Power:
    """The checks for splits of these sizes; ``margin`` None for a superiority rule."""
    return Power(holdout_tasks=holdout_tasks, holdout_clusters=holdout_clusters, reach=reach(holdout_clusters, confidence=confidence),
                 dev_tasks=dev_tasks, samples=samples,
                 dev_step=1.0 / (dev_tasks * samples) if metric == "pass_rate" and dev_tasks else 0.0, margin=margin,
                 clusters_needed=clusters_needed(margin, confidence=confidence) if margin is not None and margin > 0 else None)


def split_power(holdout: Sequence[Task], dev: Sequence[Task], *, samples: int, margin: float | None, confidence: float,
                metric: str = "pass_rate") -> Power:
    """``power`` of a workload's holdout and dev tasks."""
    return power(holdout_tasks=len(holdout), holdout_clusters=len({t.cluster for t in holdout}), dev_tasks=len(dev),
                 samples=samples, margin=margin, confidence=confidence, metric=metric)
