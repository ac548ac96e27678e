"""The second benchmark as an external plugin: examples/tooltalk is pip-installed (its own
pyproject, entry point and config dir) into a folder of its own, and every command finds it
through its `evoharness.plugins` entry point alone: no plugins key, no path in the config."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.install import install
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ALL_PASS = ("gates: every split has tasks PASS, gold replay passes PASS, do-nothing model fails PASS, deterministic PASS, "
            "final state scored PASS")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, target = install("tooltalk", tmp_path_factory.mktemp("tooltalk"))
    assert list(target.glob("evoharness_tooltalk-*.dist-info/entry_points.txt"))
    return target


def cli(site: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "evoharness", *args,
                           f"runs_dir={tmp}", "workload=tooltalk", "agent=tooltalk_agent", "tool=tooltalk"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=900)


def test_the_installed_plugin_passes_the_doctor_and_evaluates(site: Path, tmp_path: Path) -> None:
    proc = cli(site, tmp_path, "doctor")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "78 of 78 tasks" in proc.stdout and ALL_PASS in proc.stdout
    proc = cli(site, tmp_path, "evaluate", "model=sim_small")
    assert proc.returncode == 0, proc.stderr[-2000:]
    [path] = list((tmp_path / "evaluate").rglob("eval.json"))
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["provenance"]["versions"]["nvidia-tooltalk"] != "absent" and "bfcl-eval" not in report["provenance"]["versions"]
    assert 0 < report["metrics"]["pass_rate"] < 1 and len(report["tasks"]) == 22
    assert all(t["task_id"].startswith("tooltalk/") for t in report["tasks"])


def test_a_small_search_on_the_installed_plugin(site: Path, tmp_path: Path) -> None:
    proc = cli(site, tmp_path, "search", ONE_AT_A_TIME, "model=sim_large", "search.models=[sim_small]", "search.rounds=2",
               "search.trials_per_round=4", "search.population_size=2", "search.samples=1", "search.train_limit=38",
               "search.max_front_dev=2", "search.resamples=2000", "search.teacher=null", "search.study=tt",
               "mutators.enabled=[{name: rule_miner}, {name: workflow_step_append}]",
               "search.allow_underpowered=true")  # 18 holdout conversations cannot bound a 0.05 margin
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "tt" / "summary.json").read_text(encoding="utf-8"))
    kept = summary["champion"]["variant_hash"] == summary["baseline"]["variant_hash"]
    # the holdout claim is made on ToolTalk's 18 holdout conversations; with the incumbent kept nothing runs there
    assert summary["claim"]["n"] == (0 if kept else 18) and summary["front"]
    # underpowered either way, judged on the sealed split's 18 conversations
    assert summary["claim"]["underpowered"] is True and summary["claim"]["reach"] > 0.1
    assert kept or summary["claim"]["unit"] == "task"  # a conversation is its own cluster
    freeze = json.loads((tmp_path / "tt" / "freeze.json").read_text(encoding="utf-8"))
    assert freeze["doctor"]["passed"] is None  # no doctor ran in this runs_dir: recorded as unchecked
    added = [e for p in sorted((tmp_path / "tt" / "pools").glob("r*.json"))
             for e in json.loads(p.read_text(encoding="utf-8"))["added"]]
    assert added, "the mutators proposed nothing from ToolTalk's failures"
