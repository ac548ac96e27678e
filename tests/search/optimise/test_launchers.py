"""The search on real distributed engines: Hydra's Ray launcher against a Ray cluster this test starts
on loopback, and Hydra's Submitit launcher (submitit_local, the code path a SLURM cluster runs).
Each, and the default launcher (joblib, a worker process per core), must find the same trials,
front and champion as the basic launcher (one job at a time, in process) for the same seed.

The Ray cluster runs in its own mount namespace, where the orchestrator's folder is an empty
read-only tmpfs and the workers' working directory holds a file named ``runs``: a job cannot see,
create or write the study's folder (nor the response cache under it), as on a cluster with no
shared filesystem. The search must still complete, with only the orchestrator writing runs/."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.servers import debian_program, hydra_launcher, missing, python_program

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ARGS = ["search.train_limit=4", "workload.options.categories=[multi_turn_base]", "+workload.options.limit_per_split=12",
        "search.samples=1", "search.allow_underpowered=true",  # 12 holdout tasks: a launcher test, not a claim
        "search.population_size=4", "search.max_front_dev=2", "search.resamples=2000", "search.rounds=2",
        "search.trials_per_round=4", "mutators.enabled=[{name: workflow_step_append}]", "search.models=[sim_small,sim_large]"]


def search(runs: Path, *extra: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "evoharness.search", f"runs_dir={runs}", *ARGS, *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def outcome(runs: Path) -> dict[str, Any]:
    """What a search decided, launcher-independent: every round's trials (genome, state, values), the
    front, the champion and the claim."""
    storage = f"sqlite:///{runs / 'bfcl_agent' / 'study.db'}"
    rounds = []
    for k in range(2):
        study = optuna.load_study(study_name=f"bfcl_agent/r{k}", storage=storage)
        rounds.append(sorted((json.dumps(t.user_attrs.get("genome"), sort_keys=True), t.state.name, t.values)
                             for t in study.trials))
    summary = json.loads((runs / "bfcl_agent" / "summary.json").read_text(encoding="utf-8"))
    claim = summary["claim"] or {}
    return {"rounds": rounds, "front": sorted((m["variant_hash"], m["values"], m["dev"]) for m in summary["front"]),
            "champion": summary["champion"]["variant_hash"],
            "claim": {k: claim.get(k) for k in ("verdict", "mean_diff", "low", "high", "n", "cost_delta", "latency_delta")}}


@pytest.fixture(scope="module")
def basic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = tmp_path_factory.mktemp("basic") / "runs"
    proc = search(runs, "hydra/launcher=basic")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return outcome(runs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def ray_cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Ray head with 2 CPUs on loopback, in a mount namespace that hides the orchestrator's folder."""
    hydra_launcher("hydra_ray_launcher", "pip install --no-deps hydra-ray-launcher==1.2.2 (scripts/test does)")
    ray = python_program("ray")
    if os.geteuid() != 0:
        missing("hiding the orchestrator's files from the Ray workers takes a mount namespace", "run the suite as root (CI does)")
    unshare = debian_program("unshare", "util-linux")
    tried = subprocess.run([unshare, "-m", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        missing(f"`unshare -m true` failed ({tried.stderr.strip()})", "run the suite where root may make mount namespaces "
                "(a container: docker run --privileged)")
    orchestrator, worker = tmp_path / "orchestrator", tmp_path / "worker"
    orchestrator.mkdir()
    worker.mkdir()
    (worker / "runs").write_text("not a folder: a job that tries to write runs/ here fails\n", encoding="utf-8")
    port = free_port()
    start = (f"mount -t tmpfs -o ro tmpfs {orchestrator} && exec {ray} start --head --block --num-cpus 2 "
             f"--node-ip-address 127.0.0.1 --port {port} --include-dashboard false --disable-usage-stats "
             f"--object-store-memory 100000000")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.Popen([unshare, "-m", "sh", "-c", start], cwd=worker, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            assert head.poll() is None, f"ray start failed: {head.stderr.read() if head.stderr else ''}"[-2000:]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not listen within 120 s")
        yield f"127.0.0.1:{port}", orchestrator
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # --block: the head takes its raylet, GCS and workers with it
        try:
            head.wait(timeout=5)  # it rarely exits on SIGTERM alone: the whole group is killed after 5 s
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        deadline = time.time() + 10
        while time.time() < deadline and subprocess.run(["pgrep", "-g", str(head.pid)], capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(["pgrep", "-g", str(head.pid)], capture_output=True).returncode == 1, "a Ray process outlived the test"


def test_ray_launcher_without_a_shared_filesystem_finds_the_basic_launchers_front(
        basic: dict[str, Any], ray_cluster: tuple[str, Path]) -> None:
    address, orchestrator = ray_cluster
    runs = orchestrator / "runs"
    proc = search(runs, "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # every model call was made on the cluster, where the response cache under runs/ could not be
    # written: the jobs' results came back by value, and not one cache entry reached this machine
    assert not (runs / "cache").exists()
    assert (runs / "bfcl_agent" / "evals").is_dir()  # the orchestrator stored what came back
    assert outcome(runs) == basic
    assert not (orchestrator.parent / "worker" / "runs").is_dir()
    assert not list(Path(orchestrator.parent / "worker").glob("**/*.json"))  # no job wrote a record where it ran


def test_submitit_local_launcher_finds_the_basic_launchers_front(basic: dict[str, Any], tmp_path: Path) -> None:
    hydra_launcher("hydra_submitit_launcher", "install the dev extras (scripts/test does: pip install -e '.[dev]')")
    runs = tmp_path / "runs"
    proc = search(runs, "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=20", "hydra.launcher.cpus_per_task=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcome(runs) == basic


def test_the_default_launcher_runs_a_batch_in_parallel_and_finds_the_basic_launchers_front(basic: dict[str, Any],
                                                                                           tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = search(runs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcome(runs) == basic
    # the jobs ran in worker processes, and some of them at the same time
    runs_of = [json.loads(p.read_text(encoding="utf-8"))["worker"] for p in (runs / "bfcl_agent" / "evals").glob("*.json")]
    train = sorted((w["started"], w["ended"], w["pid"]) for w in runs_of)
    assert len({pid for _, _, pid in train}) >= 2  # the basic launcher runs every job in the search's one process
    assert any(b[0] < a[1] for a, b in zip(train, train[1:])), "no two jobs overlapped: the batch ran one job at a time"
    # each job's own CPU: more than nothing, and no more than its process could spend in its wall time on the cores it had
    assert all(0 < w["cpu_s"] <= (w["ended"] - w["started"]) * len(os.sched_getaffinity(0)) + 0.05 for w in runs_of)
