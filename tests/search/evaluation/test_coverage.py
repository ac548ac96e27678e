"""Tasks that call tools the agent does not offer are counted and said, at evaluate time and
once per split by the search, never scored 0 without a word."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import Task
from evoharness.search.evaluation.coverage import coverage_warning, missing_tools

ROOT = Path(__file__).resolve().parents[3]


def task(i: int, *names: str) -> Task:
    return Task(task_id=f"t/{i}", split="dev", turns=((),), tool_names=names, gold=(tuple(ToolCall(n, {}) for n in names),))


def test_counts_tasks_per_missing_tool() -> None:
    tasks = [task(0, "ls", "mv"), task(1, "mv", "cd"), task(2, "ls"), Task(task_id="t/3", split="dev", turns=((),), tool_names=())]
    assert missing_tools(["ls"], tasks) == {"mv": 2, "cd": 1}
    line = coverage_warning(["ls"], tasks, where="dev")
    assert line is not None and line.startswith("warning: 2 of 4 dev tasks call tools the agent does not offer: mv (2), cd (1)")
    assert coverage_warning(["ls", "mv", "cd"], tasks) is None


def test_evaluate_warns_when_the_agent_offers_too_few_tools(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = [sys.executable, "-m", "evoharness", "evaluate",
            f"runs_dir={tmp_path}", "model=sim_small", "workload.limit=3", "workload.options.categories=[multi_turn_base]"]
    narrow = subprocess.run([*argv, "agent.tools=[ls,cd]"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert narrow.returncode == 0, narrow.stderr[-2000:]
    assert "warning: 3 of 3 dev tasks call tools the agent does not offer" in narrow.stderr
    full = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert full.returncode == 0 and "do not offer" not in full.stderr and "does not offer" not in full.stderr
