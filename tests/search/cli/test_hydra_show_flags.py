"""Hydra's own ways to look at a config (--cfg, --package, --resolve, --info) pass through every
command: they print and run nothing, and a value read from the environment is shown as its marker."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "Xq8rT5vW2xY7bN4mK9pL3sD6fG1hJ0aQwErTyUiP"


def evoharness(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TEAM_TOKEN": TOKEN}
    return subprocess.run([sys.executable, "-m", "evoharness", *args, f"runs_dir={tmp / 'runs'}"], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["compile", "evaluate", "search", "doctor"])
def test_cfg_job_prints_the_composed_config_and_runs_nothing(tmp_path: Path, command: str) -> None:
    proc = evoharness(tmp_path, command, "--cfg", "job", "model=sim_small")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["model"]["route"] == "sim/small" and "agent" in cfg and "workload" in cfg
    assert not (tmp_path / "runs").exists()  # nothing ran: no run folder, no record


def test_package_and_resolve_show_one_node_with_secrets_as_markers(tmp_path: Path) -> None:
    role = "agent.prompt_sections.role='team ${oc.env:TEAM_TOKEN}'"
    proc = evoharness(tmp_path, "compile", "--cfg", "job", "--package", "agent", "--resolve", role)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# @package agent\n")
    assert "role: team ${oc.env:TEAM_TOKEN}" in proc.stdout and TOKEN not in proc.stdout + proc.stderr


def test_info_with_or_without_a_value(tmp_path: Path) -> None:
    assert "Config search path" in evoharness(tmp_path, "evaluate", "--info", "searchpath").stdout
    bare = evoharness(tmp_path, "compile", "-i")
    assert bare.returncode == 0 and "Installed Hydra Plugins" in bare.stdout


@pytest.mark.parametrize("args, message", [
    (["compile", "--cfg", "nope"], "--cfg needs a value among ['job', 'hydra', 'all'], got 'nope'"),
    (["evaluate", "--cfg"], "--cfg needs a value among ['job', 'hydra', 'all'], got 'runs_dir="),  # an override is no value
    (["evaluate", "-m", "model=sim_small,sim_medium", "--cfg", "job"], "--cfg shows one config, and -m asks for a sweep"),
])
def test_a_show_flag_misused_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = evoharness(tmp_path, *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
