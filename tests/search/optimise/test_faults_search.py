"""Faults over a whole small search (real CLI, Hydra, the nsga2 sweeper, litellm, the simulator's fault
injection through the model config's `extra`): no trial is lost; a timeout, 5xx or 429 is retried and,
when its retries run out, the episode is skipped, never scored 0; where nothing was skipped a trial's
quality and cost equal the fault-free run's exactly. Malformed output is the model's mistake: scored,
never skipped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from evoharness.search.optimise.study import distinct_evaluations
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ARGS = [ONE_AT_A_TIME, "search.rounds=1", "search.trials_per_round=6", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]", "search.samples=1",
        "search.population_size=2", "search.max_front_dev=2", "search.resamples=2000", "search.models=[]",
        "model.backoff_s=0.001", "model.retries=2"]
INFRA = "+model.extra.sim_faults={timeout_rate: 0.10, server_error_rate: 0.05, rate_limit_rate: 0.05}"
MALFORMED = "+model.extra.sim_faults={malformed_rate: 0.05}"


def search(tmp: Path, *extra: str) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "evoharness", "search",
                           f"runs_dir={tmp}", "search.study=f", *ARGS, *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = optuna.load_study(study_name="f/r0", storage=f"sqlite:///{tmp / 'f' / 'study.db'}")
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)  # none failed, none left running
    # 0 trials lost: the budget of 6 distinct evaluations is met, or the sampler used all its 18 asks
    # (repeats are free; a tiny space can run out of new genomes)
    assert distinct_evaluations(study) == 6 or len(study.trials) == 18
    # keyed by genome: the faults live in the model's `extra`, so the variant hashes differ between runs;
    # the first evaluation of each (a repeat of one with a skipped episode is evaluated again, and the
    # response cache then replays what it had finished)
    out: dict[str, dict[str, Any]] = {}
    for t in sorted(study.trials, key=lambda t: t.number):
        out.setdefault(json.dumps(t.user_attrs["genome"], sort_keys=True), dict(t.user_attrs["train"]))
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return search(tmp_path_factory.mktemp("clean"))


def test_infra_faults_are_retried_then_skipped_never_scored(clean: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    faulty = search(tmp_path, INFRA)
    for m in [*clean.values(), *faulty.values()]:
        assert m["scored"] + m["skipped"] == m["episodes"]  # a skipped episode is never counted as scored
    assert all(m["infra_seconds"] == 0 for m in clean.values())
    assert sum(m["infra_seconds"] for m in faulty.values()) > 0  # failed attempts happened, were timed apart
    assert sum(m["skipped"] for m in faulty.values()) > 0  # and some outlived their retries
    both = [h for h in faulty if h in clean and faulty[h]["skipped"] == 0]
    assert both, "no genome evaluated in both runs without a skip"
    for h in both:
        for key in ("pass_rate", "score_mean", "cost_per_task", "tokens_per_task", "tool_failure_rate"):
            assert faulty[h][key] == clean[h][key], (h, key)
        assert faulty[h]["attempts"] >= clean[h]["attempts"]


def test_malformed_output_is_scored_never_skipped(clean: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    faulty = search(tmp_path, MALFORMED)
    assert all(m["skipped"] == 0 and m["scored"] == m["episodes"] for m in faulty.values())
    both = [h for h in faulty if h in clean]
    assert both
    # the broken calls cost the model turns (and so tokens): the run saw them and scored them
    assert any(faulty[h]["tokens_per_task"] != clean[h]["tokens_per_task"] for h in both)
