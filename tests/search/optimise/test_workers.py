"""The preloaded launcher's workers: forked from a server that imported the job's modules, so a
worker's first job does not import litellm again. Each case runs in its own interpreter, as a
search does: loky's start method and the fork server are per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import joblib

PROBE = """
import json, os, sys
from joblib import Parallel, delayed
from evoharness.search.optimise.workers import start_fork_server

def probe():
    return {"litellm": "litellm" in sys.modules, "ppid": os.getppid(), "search": os.environ.get("EVOHARNESS_SEARCH_PID"),
            "blas": os.environ.get("OPENBLAS_NUM_THREADS")}

if __name__ == "__main__":
    {start}
    print(json.dumps({"orchestrator": os.getpid(), "workers": Parallel(n_jobs=2, backend="loky")(delayed(probe)() for _ in range(4))}))
"""


def run_probe(start: str) -> dict[str, object]:
    code = textwrap.dedent(PROBE).replace("{start}", start)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_a_worker_starts_with_litellm_imported_by_the_fork_server_not_by_the_search() -> None:
    out = run_probe('start_fork_server(["evoharness.search.optimise.preload"], n_jobs=2)')
    workers = out["workers"]
    assert all(w["litellm"] for w in workers)  # type: ignore[index,union-attr]
    assert all(w["ppid"] != out["orchestrator"] for w in workers)  # type: ignore[index,union-attr]  # forked by the server
    # what loky would have given its own workers reaches these through the server: the search to
    # watch (their parent is the server), and joblib's thread limit (the cores over the 2 workers)
    assert all(w["search"] == str(out["orchestrator"]) for w in workers)  # type: ignore[index,union-attr]
    assert all(w["blas"] == str(max(joblib.cpu_count() // 2, 1)) for w in workers)  # type: ignore[index,union-attr]


def test_without_the_fork_server_a_worker_imports_for_itself_and_a_missing_module_is_skipped() -> None:
    plain = run_probe("pass")
    assert not any(w["litellm"] for w in plain["workers"])  # type: ignore[index,union-attr]  # the control: loky's own start
    assert not any(w["search"] for w in plain["workers"])  # type: ignore[index,union-attr]
    missing = run_probe('start_fork_server(["no_such_module_anywhere"], n_jobs=2)')
    assert not any(w["litellm"] for w in missing["workers"])  # type: ignore[index,union-attr]
    assert all(w["ppid"] != missing["orchestrator"] for w in missing["workers"])  # type: ignore[index,union-attr]


def test_one_job_at_a_time_starts_no_fork_server() -> None:
    out = run_probe('assert start_fork_server(["evoharness.search.optimise.preload"], n_jobs=1) is False')
    assert not any(w["litellm"] for w in out["workers"])  # type: ignore[index,union-attr]
