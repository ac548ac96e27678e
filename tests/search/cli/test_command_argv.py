"""command_argv: the Hydra argv of a command, shaped the same for the CLI and a Python caller."""
from __future__ import annotations

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
