"""run_command, the Python API's way to run a Hydra command (raises, returns the task's value), and
run_hydra, the command line's wrapper of it (one line, exit code 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import DictConfig

from evoharness.compiler.cli import compile_task, compile_validate
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.hydra_errors import UsageError
from evoharness.compiler.hydra_run import run_command, run_hydra
from evoharness.compiler.variant import HarnessVariant


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.chdir(tmp_path)


def test_run_command_returns_the_variant_compile_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variants = {fmt: run_command("compile", [f"runs_dir={tmp_path}", f"agent.tool_format={fmt}"], compile_task, compile_validate)
                for fmt in ("bash", "json")}
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    for fmt, variant in variants.items():
        assert isinstance(variant, HarnessVariant) and variant.tool_format == fmt
        written = json.loads((tmp_path / "compiled" / variant.content_hash / "variant.json").read_text(encoding="utf-8"))
        assert written["tool_format"] == fmt
    assert printed == [v.content_hash for v in variants.values()] and len(set(printed)) == 2


@pytest.mark.parametrize(("override", "error", "needle"), [
    ("agent.tool_format=xml", ConfigError, "agent.tool_format: unknown tool format 'xml'"),
    ("agent=nonexistent", UsageError, "agent=nonexistent: no such option in config group 'agent'"),
    ("agent.tool_format=json,bash", UsageError, "a sweep needs multirun"),
])
def test_bad_input_raises_one_line_and_writes_nothing(tmp_path: Path, override: str, error: type[Exception], needle: str) -> None:
    runs = tmp_path / "runs"
    with pytest.raises(error) as raised:
        run_command("compile", [f"runs_dir={runs}", override], compile_task, compile_validate)
    message = str(raised.value)
    assert needle in message and "\n" not in message and "Fix:" in message
    assert not runs.exists()


def test_the_cli_prints_the_same_error_as_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evoharness.compiler.cli import main

    assert main([f"runs_dir={tmp_path / 'runs'}", "agent.tool_format=xml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: agent.tool_format: unknown tool format 'xml'")
    assert not (tmp_path / "runs").exists()


def _late(cfg: DictConfig) -> object:
    raise ConfigError("release_slot=fast", "found only once the run had started", "roll the slot back")


def test_a_config_error_found_once_the_run_started_is_raised_or_is_one_line(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="found only once the run had started"):
        run_command("compile", [f"runs_dir={tmp_path}"], _late, None)
    assert run_hydra("compile", [f"runs_dir={tmp_path}"], _late, None) == 2
    err = capsys.readouterr().err
    assert err == "error: release_slot=fast: found only once the run had started. Fix: roll the slot back\n"


def test_a_failing_task_propagates_from_run_command(tmp_path: Path) -> None:
    def broken(cfg: DictConfig) -> object:
        raise RuntimeError(f"broken in {cfg.runs_dir}")

    with pytest.raises(RuntimeError, match=f"broken in {tmp_path}"):
        run_command("compile", [f"runs_dir={tmp_path}"], broken, None)


def test_a_multirun_returns_none_and_runs_every_job(tmp_path: Path) -> None:
    seen: list[str] = []

    def task(cfg: DictConfig) -> str:
        seen.append(str(cfg.agent.tool_format))
        return "a job's value"

    assert run_command("compile", ["-m", f"runs_dir={tmp_path}", "agent.tool_format=json,bash", "hydra/launcher=basic"], task, None) is None
    assert sorted(seen) == ["bash", "json"]


def test_an_enclosing_hydra_apps_config_is_neither_read_nor_lost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A command run from inside a user's own Hydra app composes on its own search path, and the app's
    HydraConfig is its own again afterwards."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    import evoharness

    outer = OmegaConf.create({"hydra": {"runtime": {"config_sources": [{"path": str(tmp_path), "schema": "file",
                                                                        "provider": "outer"}]}}})
    HydraConfig.instance().cfg = outer  # type: ignore[assignment]
    try:
        variant = evoharness.compile({"runs_dir": str(tmp_path / "runs")})
        assert variant.content_hash  # composed from the package's configs, not the outer app's folder
        assert HydraConfig.instance().cfg is outer
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]
