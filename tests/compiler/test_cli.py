"""The compile command end to end, through a real subprocess and Hydra."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "evoharness.compiler", f"runs_dir={tmp}", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120
    )


def _hash(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    digest, path = line.split()
    assert len(digest) == 64 and Path(path, "variant.json").exists()
    return digest


def test_compile_twice_same_hash_and_bash_differs(tmp_path: Path) -> None:
    first = _hash(run(tmp_path, "agent=bfcl_agent"))
    second = _hash(run(tmp_path, "agent=bfcl_agent"))
    bash = _hash(run(tmp_path, "agent=bfcl_agent", "agent.tool_format=bash"))
    assert first == second != bash
    compiled = tmp_path / "compiled"
    assert sorted(p.name for p in compiled.iterdir()) == sorted({first, bash})
    for name in ("variant.json", "system_prompt.md", "tools.json", "workflow.json"):
        assert (compiled / first / name).stat().st_size > 0


def test_multirun_sweep_compiles_three_variants_into_sweep_dir(tmp_path: Path) -> None:
    proc = run(tmp_path, "-m", "agent.tool_format=json,bash,both")
    assert proc.returncode == 0, proc.stderr
    hashes = {line.split()[0] for line in proc.stdout.splitlines() if len(line.split()) == 2 and len(line.split()[0]) == 64}
    assert len(hashes) == 3
    sweep_dirs = list((tmp_path / "compile-multirun").iterdir())
    assert len(sweep_dirs) == 1
    in_sweep = {p.parent.name for p in sweep_dirs[0].glob("*/*/variant.json")}
    assert in_sweep == hashes


class _Writes(io.StringIO):
    """A stream that keeps each write as a pipe's reader would see it arrive."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, s: str) -> int:
        self.writes.append(s)
        return super().write(s)


def test_a_jobs_line_reaches_stdout_in_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's jobs share one stdout. A line written in two pieces (its text, then its newline, as
    print does) lets another job's line land between them on an unbuffered stream (PYTHONUNBUFFERED=1):
    two hashes then share a line, and the sweep above reads fewer than three."""
    from evoharness.search.cli.main import main

    out = _Writes()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.chdir(tmp_path)
    assert main(["compile", f"runs_dir={tmp_path}", f"hydra.run.dir={tmp_path}/run"]) == 0
    assert any(re.fullmatch(r"[0-9a-f]{64}  \S+\n", w) for w in out.writes), out.writes
    assert all(w.endswith("\n") for w in out.writes), f"a line reached stdout in pieces: {out.writes}"


BAD = [
    (["agent.tools=[no_such_tool]"], "agent.tools[0]: unknown tool 'no_such_tool'"),
    (["agent.tool_format=xml"], "agent.tool_format: unknown tool format 'xml'"),
    (["agent.workflow.0.after=[report]"], "agent.workflow: steps form a cycle"),
    (["agent.workflow.1.after=[nope]"], "comes after unknown step 'nope'"),
    (["agent.prompt_sections.style='Use {{ tone }}'"], "agent.prompt_sections.style: template uses an undefined variable"),
    (["+tool.definitions.x={description: d, parameters: {type: dict}}", "agent.tools=[x]"], "tool.definitions.x.parameters"),
    (["+tool.definitions.y={description: d, parameters: {type: object}, color: red}", "agent.tools=[y]"], "tool.definitions.y.color"),
    (["agent=nonexistent"], "agent=nonexistent: no such option in config group 'agent'"),
    (["model=gpt5"], "model=gpt5: no such option in config group 'model'"),
    (["agent.max_turns=many"], "agent.max_turns: Value 'many'"),
    (["model.temperature=hot"], "model.temperature: Value 'hot'"),
    (["agent.no_such_key=1"], "no_such_key"),
    (["agent.tool_format=json,bash"], "a sweep needs multirun"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[b[1][:40] for b in BAD])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = run(tmp_path, *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0], proc.stderr
    assert needle in lines[0]
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "bad input must leave runs/ untouched"


def test_bad_value_in_one_sweep_combination_rejects_the_whole_sweep(tmp_path: Path) -> None:
    proc = run(tmp_path, "-m", "agent.tool_format=json,xml")
    assert proc.returncode == 2 and "'xml'" in proc.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_run_composes_its_config_once_and_hydra_runs_it_as_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The preflight's composition is the run's: Hydra's loader is asked once, and the run dir holds
    what Hydra's own run writes (the saved config with the command's overrides and job name)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from evoharness.search.cli.main import main

    calls: list[list[str]] = []
    real = ConfigLoaderImpl.load_configuration

    def counted(self: ConfigLoaderImpl, *args: object, **kwargs: object) -> object:
        calls.append(list(kwargs.get("overrides") or args[1]))  # type: ignore[call-overload]
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    monkeypatch.chdir(tmp_path)
    assert main(["compile", f"runs_dir={tmp_path}", "agent.tool_format=bash", f"hydra.run.dir={tmp_path}/run"]) == 0
    assert len(calls) == 1 and "agent.tool_format=bash" in calls[0]
    saved = (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text(encoding="utf-8")
    assert "agent.tool_format=bash" in saved and "hydra.job.name" not in saved
    assert "name: compile" in (tmp_path / "run" / ".hydra" / "hydra.yaml").read_text(encoding="utf-8")
    digest = capsys.readouterr().out.split()[0]
    assert [v.parent.name for v in (tmp_path / "run").glob("*/variant.json")] == [digest]
    calls.clear()  # a sweep still goes through hydra.main: the preflight composes each combination first
    assert main(["compile", "-m", f"runs_dir={tmp_path}", "agent.tool_format=bash,json", f"hydra.sweep.dir={tmp_path}/sweep"]) == 0
    assert len(calls) >= 3 and len(list((tmp_path / "sweep").glob("*/*/variant.json"))) == 2


def test_the_default_launcher_has_two_workers_per_usable_core_and_no_more_than_a_batch() -> None:
    import os

    from evoharness.compiler.preflight import usable_workers

    cores = len(os.sched_getaffinity(0))
    assert usable_workers(256) == min(2 * cores, 256) and usable_workers(1) == 1 and usable_workers(0) == 1
    assert usable_workers("3") == min(2 * cores, 3)


def test_a_run_on_a_primary_config_of_ones_own_stays_in_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Hydra 1.3's rules hold for a composed run too: a config that does not set hydra.job.chdir is
    run where the command was given (Hydra's 1.1 rules would change into the run dir)."""
    from evoharness.search.cli.main import main

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "myapp.yaml").write_text("defaults:\n  - evoharness_schema\n  - agent: bfcl_agent\n  - tool: bfcl\n  - model: sim_small\n"
                                     "  - workload: bfcl\n  - _self_\nruns_dir: runs\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["compile", "--config-dir", str(conf), "--config-name", "myapp"]) == 0
    digest = capsys.readouterr().out.split()[0]
    assert (work / "runs" / "compiled" / digest / "variant.json").is_file()
    assert not list((work / "outputs").rglob("runs"))  # Hydra's own run dir (outputs/<day>/<time>), never the cwd
    [saved] = list((work / "outputs").glob("*/*/.hydra/hydra.yaml"))
    assert "version_base: '1.3'" in saved.read_text(encoding="utf-8")
