"""The live progress line of a round (tqdm, on a terminal only: piped output and logs get the
round lines alone): paid evaluations against the budget, episodes, spend so far, the best train
quality and the cheapest cost that qualifies (reaches the decision's bar on train)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import optuna


class Progress:
    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def show(self, paid: int, postfix: Callable[[], str]) -> None:
        if self.bar is None:  # not a terminal: nothing to draw, nothing to compute
            return
        self.bar.n = min(paid, self.bar.total)
        self.bar.set_postfix_str(postfix(), refresh=False)
        self.bar.refresh()


@contextmanager
def progress_line(desc: str, total: int) -> Iterator[Progress]:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="eval", leave=False, disable=None, dynamic_ncols=True)
    try:
        yield Progress(None if bar.disable else bar)
    finally:
        bar.close()


def study_progress(study: optuna.Study, quality: str, spent_usd: float, bar: float | None) -> str:
    """episodes, spend, best quality, cheapest qualifying cost: one line."""
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    train = [t.user_attrs.get("train") or {} for t in done]
    episodes = int(sum(float(m.get("episodes", 0)) for m in train))
    best = max((float(m.get(quality, 0.0)) for m in train), default=0.0)
    qualifying = [float(m.get("cost_per_task", 0.0)) for m in train if bar is not None and float(m.get(quality, 0.0)) >= bar]
    cheapest = f", cheapest qualifying ${min(qualifying):.4f}/task" if qualifying else ""
    return f"{episodes} episodes, ${spent_usd:.2f} spent, best {quality} {best:.3f}{cheapest}"
