"""A tasks file's scoring contract is part of what a search freezes: a real search on a tasks file
named relatively by a config dir's workload file (run from another folder), the file edited (one
task's expected_state), and the doctor's hash moves and the resume is refused in one line, exit 2,
naming the task and the fix, before anything is paid for."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "refunds"
WORKLOAD = """defaults:
  - workload_schema
  - _self_
name: tasks
split: dev
options:
  path: data/tasks.jsonl
  tools: ${tool.callables}
"""


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(EXAMPLE)}
    return subprocess.run([sys.executable, "-m", "evoharness", *args, "--config-dir", str(tmp / "cfg"), f"runs_dir={tmp / 'runs'}",
                           "plugins=[refunds_shop]", "workload=desk", "agent=refunds_agent", "tool=refunds", "cache_dir=null"],
                          cwd=tmp / "elsewhere", env=env, capture_output=True, text=True, timeout=900)


def doctor_hash(proc: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"^doctor: workload 'tasks', \d+ of \d+ tasks, hash ([0-9a-f]{12})$", proc.stdout, re.M)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return found.group(1)


def test_an_edited_expected_state_moves_the_doctor_hash_and_a_resume_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cfg" / "workload" / "data").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cfg" / "workload" / "desk.yaml").write_text(WORKLOAD, encoding="utf-8")
    tasks = tmp_path / "cfg" / "workload" / "data" / "tasks.jsonl"  # relative to desk.yaml, not to the working folder
    tasks.write_text((EXAMPLE / "refunds_shop" / "tasks.jsonl").read_text(encoding="utf-8"), encoding="utf-8")

    passing = cli(tmp_path, "doctor")
    assert passing.returncode == 0 and "gold replay passes PASS" in passing.stdout, passing.stdout[-2000:] + passing.stderr[-2000:]
    search = [ONE_AT_A_TIME, "model=sim_small", "search.rounds=1", "search.trials_per_round=2", "search.population_size=2",
              "search.samples=1", "search.allow_underpowered=true", "search.study=desk"]
    first = cli(tmp_path, "search", *search)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    study = tmp_path / "runs" / "desk"
    frozen = json.loads((study / "freeze.json").read_text(encoding="utf-8"))
    assert frozen["task_hashes"]["tasks/refund_0"] and len(frozen["task_hashes"]) == 36
    spent = (study / "spend.jsonl").read_bytes()

    records = [json.loads(line) for line in tasks.read_text(encoding="utf-8").splitlines()]
    first_task = next(r for r in records if r["id"] == "refund_0")
    first_task["expected_state"]["orders"]["A-100"]["status"] = "cancelled"  # the gold replay can no longer reach it
    tasks.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    failing = cli(tmp_path, "doctor")
    assert failing.returncode == 1 and "gold replay passes FAIL" in failing.stdout, failing.stdout[-2000:]
    assert doctor_hash(failing) != doctor_hash(passing)

    resumed = cli(tmp_path, "search", *search)
    errors = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
    assert resumed.returncode == 2 and len(errors) == 1 and "Traceback" not in resumed.stderr, resumed.stderr[-2000:]
    assert "study 'desk' was frozen on other tasks: 1 changed (tasks/refund_0)" in errors[0]
    assert "Fix: restore the tasks (the tasks file) as they were, pick a new search.study" in errors[0]
    assert (study / "spend.jsonl").read_bytes() == spent  # nothing was paid for under the edited contract
