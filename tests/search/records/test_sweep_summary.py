"""`evoharness evaluate -m` ends with one table across its jobs and sweep_summary.json/.csv."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from evoharness.search.records.format import fmt_metric
from evoharness.search.records.sweep import pareto

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]


def test_pareto_marks_the_non_dominated_rows() -> None:
    rows = [{"pass_rate": 0.8, "cost_per_task": 1.0, "latency_p95": 2.0},
            {"pass_rate": 0.6, "cost_per_task": 0.1, "latency_p95": 1.0},
            {"pass_rate": 0.5, "cost_per_task": 0.2, "latency_p95": 1.5},  # worse than the second everywhere
            {"pass_rate": 0.8, "cost_per_task": 1.0, "latency_p95": 2.0},  # a tie is not dominance
            {"pass_rate": None, "cost_per_task": 0.0, "latency_p95": 0.0}]  # nothing scored: never on the front
    assert pareto(rows) == [True, True, False, True, False]


def test_a_sweep_on_a_promoted_release_says_so_under_its_table() -> None:
    from evoharness.search.records.sweep import table

    row = {"status": "ok", "pareto": True, "variant": "model=sim_small", "metrics": {"pass_rate": 0.5}, "priced": True}
    released = {**row, "release": {"component": "bfcl_agent", "slot": "default", "snapshot": "ab" * 32}}
    assert "promoted release" not in table([{**row, "release": None}])
    assert table([released, {**released, "variant": "model=sim_large"}]).splitlines()[-1] == (
        "evaluated on the promoted release: slot default of bfcl_agent is snapshot abababababab; each job's overrides apply on "
        "top of it (release_slot=null evaluates the base config)")


def record_overrides(sweep: Path, job: int) -> list[str]:
    return [str(o) for o in OmegaConf.load(sweep / str(job) / ".hydra" / "overrides.yaml")]


def test_an_evaluate_sweep_ends_with_one_comparison(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "evoharness",
                           "evaluate", "-m", "model=sim_small,sim_large",
                           "agent.tool_format=json,bash", "workload.limit=3", "workload.options.categories=[multi_turn_base]",
                           f"runs_dir={tmp_path}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [sweep] = list(tmp_path.glob("evaluate-multirun/*"))
    summary = json.loads((sweep / "sweep_summary.json").read_text(encoding="utf-8"))
    jobs = summary["jobs"]
    assert summary["schema_version"] == 2 and len(jobs) == 4
    # each row is named by what sets it apart, not by the overrides every job shares
    assert [j["variant"] for j in jobs] == ["model=sim_small agent.tool_format=json", "model=sim_small agent.tool_format=bash",
                                            "model=sim_large agent.tool_format=json", "model=sim_large agent.tool_format=bash"]
    for j in jobs:
        record = json.loads((sweep / str(j["job"]) / "eval.json").read_text(encoding="utf-8"))
        assert j["metrics"]["pass_rate"] == record["metrics"]["pass_rate"]
    cheapest = min(jobs, key=lambda j: j["metrics"]["cost_per_task"])
    assert cheapest["pareto"]  # the cheapest variant is always on the front
    assert pareto([j["metrics"] for j in jobs]) == [j["pareto"] for j in jobs]
    with open(sweep / "sweep_summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["variant"] for r in rows] == [j["variant"] for j in jobs]
    assert [r["pareto"] == "True" for r in rows] == [j["pareto"] for j in jobs]
    table = proc.stdout[proc.stdout.index("   variant"):]
    assert "model=sim_large agent.tool_format=bash" in table and "on the Pareto front" in table
    # before the table, one line per job as it finished (not each job's whole metrics table)
    lines = [line for line in proc.stdout[:proc.stdout.index("   variant")].splitlines() if line.startswith("job ")]
    assert sorted(lines) == sorted(
        f"job {j['job']} done ({' '.join(record_overrides(sweep, j['job']))}): "
        f"pass_rate {fmt_metric(j['metrics']['pass_rate'], 'pass_rate')}, "
        f"cost_per_task {fmt_metric(j['metrics']['cost_per_task'], 'cost_per_task')}, "
        f"latency_p95 {fmt_metric(j['metrics']['latency_p95'], 'latency_p95')}, "
        f"tokens_per_task {fmt_metric(j['metrics']['tokens_per_task'], 'tokens_per_task')}, skipped 0" for j in jobs)
    assert "score_std" not in proc.stdout
    assert "promoted release" not in table and all(j["release"] is None for j in jobs)  # nothing promoted here


def test_a_sweep_stopped_by_a_failed_job_still_leaves_its_comparison(tmp_path: Path) -> None:
    import evoharness.compiler.sim.server as sim_server

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "SIM_HTTP_KEY": "sk-local-simulator-key"}
    with sim_server.BackgroundServer() as srv:
        # the second job reaches the simulator's HTTP route without the episode id it needs: a 400,
        # a configuration error no retry fixes, so the job fails and Hydra's basic sweeper stops there
        proc = subprocess.run([sys.executable, "-m", "evoharness",
                               "evaluate", "-m", "model.route=openai/sim/small", f"model.api_base={srv.api_base}",
                               "model.api_key_env=SIM_HTTP_KEY", "model.send_episode_id=true,false", "workload.limit=2",
                               "workload.options.categories=[multi_turn_base]", f"runs_dir={tmp_path}"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 or "Error" in proc.stderr, proc.stderr[-1500:]  # the failed job did stop the sweep
    [sweep] = list(tmp_path.glob("evaluate-multirun/*"))
    jobs = json.loads((sweep / "sweep_summary.json").read_text(encoding="utf-8"))["jobs"]
    assert [j["status"] for j in jobs] == ["ok", "failed"] and jobs[0]["metrics"]["pass_rate"] is not None
