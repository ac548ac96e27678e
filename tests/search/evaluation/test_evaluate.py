"""evaluate_variant and `evoharness evaluate` on BFCL with the simulated model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from evoharness.compiler.sim import configure_sim, reset_sim
from evoharness.compiler.variant import compile_agent
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
from evoharness.search.evaluation.evaluate import evaluate_variant

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = BfclWorkload()
DEV = list(WORKLOAD.tasks("dev"))[:12]


def agent() -> dict[str, Any]:
    raw = OmegaConf.load(ROOT / "evoharness" / "conf" / "agent" / "bfcl_agent.yaml")
    raw.pop("defaults")
    return OmegaConf.to_container(raw)  # type: ignore[return-value]


def variant(route: str, **model: Any) -> Any:
    return compile_agent(agent(), tool={"source": "bfcl"},
                         model={"route": route, "temperature": 0.0, "retries": 2, "backoff_s": 0.001, "send_episode_id": True, **model})


@pytest.fixture(autouse=True)
def fast_sim() -> Iterator[None]:
    configure_sim(None, time_scale=0.01)
    yield
    reset_sim()


def test_large_scores_higher_and_costs_more_than_small() -> None:
    small = evaluate_variant(variant("sim/small"), WORKLOAD, "dev", tasks=DEV, samples=1)
    large = evaluate_variant(variant("sim/large"), WORKLOAD, "dev", tasks=DEV, samples=1)
    assert 0 < small.metrics["pass_rate"] < 1
    assert large.metrics["pass_rate"] > small.metrics["pass_rate"]
    assert large.metrics["cost_per_task"] > small.metrics["cost_per_task"] > 0
    assert small.metrics["latency_p95"] > 0 and small.metrics["tokens_per_task"] > 0


def test_same_seed_same_report() -> None:
    def essentials(r: Any) -> Any:
        return [(e.task_id, e.sample, e.passed, e.score, e.cost_usd, e.prompt_tokens, e.completion_tokens, e.tool_calls)
                for e in r.episodes]

    v = variant("sim/small", temperature=0.7)
    a = evaluate_variant(v, WORKLOAD, "dev", tasks=DEV, samples=2, seed=3)
    b = evaluate_variant(v, WORKLOAD, "dev", tasks=DEV, samples=2, seed=3)
    c = evaluate_variant(v, WORKLOAD, "dev", tasks=DEV, samples=2, seed=4)
    assert essentials(a) == essentials(b)
    assert essentials(a) != essentials(c)
    assert "determinism" in a.metrics and 0 <= a.metrics["determinism"] <= 1


def test_infra_faults_are_retried_then_skipped_never_scored_zero() -> None:
    clean = evaluate_variant(variant("sim/small"), WORKLOAD, "dev", tasks=DEV, samples=1)
    configure_sim("sim/small", server_error_rate=0.2, rate_limit_rate=0.1)
    flaky = evaluate_variant(variant("sim/small"), WORKLOAD, "dev", tasks=DEV, samples=1)
    # retries absorb most faults: the episodes that finished score exactly as without faults
    scored = {e.task_id: e.passed for e in flaky.episodes if e.scored}
    assert scored and all(scored[t] == e.passed for e in clean.episodes for t in [e.task_id] if t in scored)
    # the retries are reported apart (attempts, infra seconds), not folded into the variant's latency
    assert clean.metrics["infra_seconds"] == 0.0 and clean.metrics["attempts"] == sum(
        1 for e in clean.episodes for _ in range(e.model_calls))
    assert flaky.metrics["infra_seconds"] > 0.0 and flaky.metrics["attempts"] > sum(e.model_calls for e in flaky.episodes)
    configure_sim("sim/small", server_error_rate=1.0, rate_limit_rate=0.0)
    down = evaluate_variant(variant("sim/small"), WORKLOAD, "dev", tasks=DEV, samples=1)
    assert down.metrics["skipped"] == len(DEV) and "pass_rate" not in down.metrics
    assert all("InternalServerError" in (e.infra_error or "") for e in down.episodes)


def cli(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoharness", "evaluate", f"runs_dir={tmp}",
         "workload.limit=6", *args],
        cwd=ROOT, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}, capture_output=True, text=True, timeout=300,
    )


def test_cli_writes_eval_json_without_secrets(tmp_path: Path) -> None:
    proc = cli(tmp_path, "model.api_key_env=EVO_TEST_KEY", env={"EVO_TEST_KEY": "sk-evotest-1234567890"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pass_rate" in proc.stdout and "cost_per_task" in proc.stdout
    [path] = list(tmp_path.glob("evaluate/*/eval.json"))
    record = json.loads(path.read_text())
    assert record["split"] == "dev" and len(record["tasks"]) == 6 and record["metrics"]["episodes"] == 6
    assert record["provenance"]["versions"]["bfcl-eval"] == "2026.3.23" and len(record["provenance"]["tasks_hash"]) == 64
    assert record["config"]["model"]["api_key_env"] == "EVO_TEST_KEY"
    every_file = "".join(p.read_text(errors="ignore") for p in tmp_path.rglob("*") if p.is_file())
    assert "sk-evotest-1234567890" not in every_file + proc.stdout + proc.stderr


def test_cli_model_ab_sweep_on_the_same_tasks(tmp_path: Path) -> None:
    proc = cli(tmp_path, "-m", "model=sim_small,sim_large")
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("evaluate-multirun/*/*/eval.json"))]
    assert [r["model"] for r in records] == ["sim/small", "sim/large"]
    assert records[0]["provenance"]["tasks_hash"] == records[1]["provenance"]["tasks_hash"]


def test_storage_password_never_reaches_a_record(tmp_path: Path) -> None:
    literal = cli(tmp_path, "search.storage=postgresql://evo:hunter2pw@127.0.0.1/studies")
    assert literal.returncode == 2 and "oc.env" in literal.stderr.strip().splitlines()[-1]
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "refused input must write nothing"
    proc = cli(tmp_path, "search.storage=${oc.env:EVO_TEST_STORAGE}", "workload.limit=2",
               env={"EVO_TEST_STORAGE": "postgresql://evo:hunter2pw@127.0.0.1/studies"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    [path] = list(tmp_path.glob("evaluate/*/eval.json"))
    assert "evo:***@127.0.0.1" in path.read_text()
    assert not any("hunter2pw" in p.read_text(errors="ignore") for p in tmp_path.rglob("*") if p.is_file())


def test_identical_temperature_zero_repeats_are_measured_then_not_paid() -> None:
    v = variant("sim/small")
    judged = evaluate_variant(v, WORKLOAD, "dev", tasks=DEV, samples=2, seed=1)
    paid = evaluate_variant(v, WORKLOAD, "dev", tasks=DEV, samples=2, seed=1, probe=0)
    # the first four tasks ran both samples (the measurement); the other eight ran one
    assert judged.metrics["episodes"] == 4 * 2 + 8 and judged.metrics["samples_skipped"] == 8
    assert paid.metrics["episodes"] == 24 and paid.metrics["samples_skipped"] == 0
    assert judged.metrics["determinism"] == 1.0
    # nothing the claim or the objectives read changed: per-task means of identical samples
    assert [(r.task_id, r.pass_fraction, r.cost_mean) for r in judged.tasks] == [
        (r.task_id, r.pass_fraction, r.cost_mean) for r in paid.tasks]
    assert judged.metrics["pass_rate"] == paid.metrics["pass_rate"]


def test_each_task_row_carries_its_tasks_cluster() -> None:
    """An episode names only its task id: the evaluator, which has the tasks, puts each row in its
    scenario's cluster, the four categories of a scenario in one."""
    every = BfclWorkload(categories=("base", "miss_param", "miss_func", "long_context"))
    tasks = list(every.tasks("dev"))[:8]  # two scenarios, four categories each
    r = evaluate_variant(variant("sim/large"), every, "dev", tasks=tasks, samples=1)
    rows = {row.task_id: row.cluster for row in r.tasks}
    assert rows == {t.task_id: f"bfcl/scenario_{t.data['index']}" for t in tasks}
    assert len(set(rows.values())) == 2


def test_sampled_or_flaky_repeats_are_all_paid() -> None:
    warm = evaluate_variant(variant("sim/small", temperature=0.7), WORKLOAD, "dev", tasks=DEV, samples=2, seed=1)
    assert warm.metrics["episodes"] == 24 and warm.metrics["samples_skipped"] == 0
    # a probe sample lost to an infrastructure failure is not an observed repeat
    configure_sim(None, time_scale=0.0, timeout_rate=0.3)
    flaky = evaluate_variant(variant("sim/small", retries=0), WORKLOAD, "dev", tasks=DEV, samples=2, seed=1)
    assert flaky.metrics["skipped"] > 0 and flaky.metrics["episodes"] == 24 and flaky.metrics["samples_skipped"] == 0


def test_repeats_identical_compares_what_the_samples_did() -> None:
    from evoharness.compiler.runtime.trajectory import ToolCallRecord, Trajectory
    from evoharness.search.evaluation.evaluate import repeats_identical

    def traj(task: str, sample: int, value: str, status: str = "completed") -> Trajectory:
        return Trajectory(task, sample, 0, "h", status,  # type: ignore[arg-type]
                          tool_calls=(ToolCallRecord(0, "cd", {"folder": value}, "ok", None),), responses=("done",))

    assert repeats_identical([traj("a", 0, "x"), traj("a", 1, "x"), traj("b", 0, "y"), traj("b", 1, "y")])
    assert not repeats_identical([traj("a", 0, "x"), traj("a", 1, "x"), traj("b", 0, "y"), traj("b", 1, "z")])
    assert not repeats_identical([traj("a", 0, "x", "infra_error"), traj("a", 1, "x", "infra_error")])
    assert not repeats_identical([])


def test_a_later_task_lost_to_the_infrastructure_runs_its_other_samples() -> None:
    from evoharness.compiler.runtime.trajectory import Trajectory
    from evoharness.search.evaluation import evaluate as ev

    real = ev._episode
    victim = DEV[6].task_id

    async def flaky(variant: Any, workload: Any, task: Any, sample: int, seed: int, client: Any, *rest: Any) -> Any:
        if task.task_id == victim and sample == 0:
            traj = Trajectory(task.task_id, sample, seed, variant.content_hash, "infra_error", infra_error="timeout")
            return ev.EpisodeResult.from_episode(traj, None), traj
        return await real(variant, workload, task, sample, seed, client, *rest)

    import pytest as _pytest

    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(ev, "_episode", flaky)
        report = evaluate_variant(variant("sim/small"), WORKLOAD, "dev", tasks=DEV, samples=3, seed=1)
    row = report.task(victim)
    assert row is not None and row.scored == 2  # its other two samples ran and were scored
    assert report.metrics["samples_skipped"] == 7 * 2  # stand-ins only for the seven other later tasks


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_the_progress_line_counts_every_episode_run_and_ends_full(temperature: float, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    report = evaluate_variant(variant("sim/small", temperature=temperature), WORKLOAD, "dev", tasks=DEV, samples=2, seed=1,
                              progress=True)
    ran = len(report.episodes)  # the episodes played: an identical repeat that stands in is not among them
    assert ran == 24 - int(report.metrics.get("samples_skipped", 0))
    counts = [(int(a), int(b)) for a, b in re.findall(r"\| *(\d+)/(\d+) \[", capsys.readouterr().err)]
    assert counts and counts[-1] == (ran, ran) and ran > 0
    assert all(n <= total for n, total in counts) and max(n for n, _ in counts) == ran
