"""The cheapest_noninferior pick on constructed dev reports: paired against the reference, a member
whose every episode was skipped is never chosen, and an unscored reference stops the finish with
one line instead of a traceback."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoharness.search.evaluation.metrics import EvalReport, TaskRow
from evoharness.search.optimise.select_dev import FinishAborted
from evoharness.search.optimise.select_dev import pick_noninferior as _cheapest


def report(passes: list[float], cost: float) -> EvalReport:
    rows = tuple(TaskRow(f"t{i}", 1, p, p, 0.0, cost, 1.0) for i, p in enumerate(passes))
    mean = sum(passes) / len(passes) if passes else 0.0
    return EvalReport("h", "dev", 1, (), {"pass_rate": mean, "cost_per_task": cost}, rows)


def member(trial: int, rep: EvalReport, feasible: bool = True) -> tuple[tuple[float, ...], dict[str, Any]]:
    return (0.0,), {"trial": trial, "dev": dict(rep.metrics), "dev_verdict": {"feasible": feasible}}


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.optimise.settings import RunSettings

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "search.resamples=500"])
    GlobalHydra.instance().clear()
    return RunSettings.from_config(cfg, conf_dirs=[CONF_DIR])


def test_an_all_skipped_member_is_never_picked_and_the_rest_are_paired(settings: Any) -> None:
    reference = report([1.0] * 60 + [0.0] * 20, 0.1)
    same = report([1.0] * 60 + [0.0] * 20, 0.02)  # identical outcomes at a fifth of the cost, on 80 tasks (73 bound 0.05)
    skipped = report([], 0.0)  # every episode an infrastructure failure: no row, cost 0
    ranked = [member(1, skipped), member(2, same)]
    pick, decision = _cheapest(settings, "pass_rate", reference, ranked, [skipped, same], echo=lambda _: None)
    assert pick is not None and pick["trial"] == 2 and decision["evidence"] == "interval"
    assert ranked[0][1]["dev_vs_reference"] is None and ranked[1][1]["dev_vs_reference"]["n"] == 80


def test_an_unscored_reference_is_one_line_not_a_traceback(settings: Any) -> None:
    with pytest.raises(FinishAborted, match="scored no task"):
        _cheapest(settings, "pass_rate", report([], 0.0), [member(1, report([1.0], 0.01))], [report([1.0], 0.01)],
                  echo=lambda _: None)
