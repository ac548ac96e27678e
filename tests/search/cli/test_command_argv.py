"""command_argv and run_command: a command run the way the CLI runs it, from Python (argv shaped the same, the task's value returned)."""
from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.compiler.hydra_errors import UsageError
from evoharness.search.cli.main import command_argv


def test_a_search_is_a_multirun_under_nsga2_and_its_sweeps_name_the_search_space() -> None:
    assert command_argv("search", ["model=sim_small,sim_medium", "model.temperature=0,0.7", "search.rounds=2"]) == [
        "-m", "search.models=[sim_small,sim_medium]", "search.temperatures=[0,0.7]", "search.rounds=2", "hydra/sweeper=nsga2"]
    # given explicitly, neither is added again
    assert command_argv("search", ["--multirun", "hydra/sweeper=basic"]) == ["--multirun", "hydra/sweeper=basic"]


def test_a_search_cannot_sweep_what_is_not_a_search_space() -> None:
    with pytest.raises(UsageError, match=r"workload.limit=1,2: a search cannot sweep 'workload.limit'\. Fix: sweep one of"):
        command_argv("search", ["workload.limit=1,2"])


def test_an_evaluate_sweep_ends_with_one_table_and_other_commands_are_left_alone() -> None:
    [*given, summary] = command_argv("evaluate", ["-m", "model=sim_small,sim_medium"])
    assert given == ["-m", "model=sim_small,sim_medium"] and summary.endswith("SweepSummary")
    assert command_argv("evaluate", ["model=sim_small"]) == ["model=sim_small"]
    assert command_argv("compile", ["-m", "agent.tool_format=json,bash"]) == ["-m", "agent.tool_format=json,bash"]


def test_a_python_caller_gets_the_evaluation_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from evoharness.compiler.hydra_run import run_command
    from evoharness.search.cli.main import hydra_commands
    from evoharness.search.evaluation.metrics import EvalReport

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.chdir(tmp_path)
    task, validate = hydra_commands()["evaluate"]
    argv = command_argv("evaluate", ["workload.limit=2", f"runs_dir={tmp_path}", f"hydra.run.dir={tmp_path}/run"])
    report = run_command("evaluate", argv, task, validate)
    assert isinstance(report, EvalReport)
    record = json.loads((tmp_path / "run" / "eval.json").read_text(encoding="utf-8"))
    assert record["metrics"] == json.loads(json.dumps(dict(report.metrics))) and len(record["tasks"]) == 2
