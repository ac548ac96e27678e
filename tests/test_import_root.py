"""One import root: what is installed is ``evoharness`` (its .compiler, .search and .conf), so a
user's own project with a ``conf/`` package, a ``search.py`` and a ``compiler.py`` on the path can
run every command. Each of the user's modules raises if imported: a command that reaches one
of them by mistake fails here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
REFUNDS = ROOT / "examples" / "refunds"
SHOP = ["plugins=[refunds_shop]", "workload=refunds", "agent=refunds_agent", "tool=refunds"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hydra user's project folder, as it usually looks."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "conf" / "model").mkdir(parents=True)
    (folder / "conf" / "__init__.py").write_text("raise ImportError('the user conf package was imported')\n")
    (folder / "conf" / "model" / "x.yaml").write_text("route: sim/small\n")
    for name in ("search", "compiler"):
        (folder / f"{name}.py").write_text(f"raise ImportError('the user {name}.py was imported')\n")
    return folder


def run(project: Path, *args: str, command: str = "evoharness") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": os.pathsep.join([".", str(REFUNDS)])}
    argv = [str(Path(sys.executable).parent / "evoharness")] if command == "evoharness" else [sys.executable, "-m", command]
    return subprocess.run([*argv, *args], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def test_nothing_installs_a_top_level_compiler_search_or_conf(tmp_path: Path) -> None:
    for name in ("compiler", "search", "conf"):
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and f"No module named '{name}'" in proc.stderr, (name, proc.stderr)
    proc = subprocess.run([sys.executable, "-c", "import evoharness.compiler, evoharness.search, evoharness.conf"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_compile_and_doctor_run_beside_a_user_conf_and_search_py(project: Path) -> None:
    compiled = run(project, f"runs_dir={project / 'runs'}", *SHOP, command="evoharness.compiler")
    assert compiled.returncode == 0, compiled.stderr
    doctor = run(project, "doctor", f"runs_dir={project / 'runs'}", *SHOP, "workload.limit=3")
    assert doctor.returncode == 0, doctor.stderr
    assert "gates:" in doctor.stdout and "FAIL" not in doctor.stdout, doctor.stdout


def test_a_search_runs_beside_a_user_conf_and_search_py(project: Path) -> None:
    proc = run(project, f"runs_dir={project / 'runs'}", *SHOP, "hydra/launcher=basic", "model=sim_large", "search.models=[sim_small]",
               "search.rounds=1", "search.population_size=2", "search.trials_per_round=2", "search.train_limit=3",
               "search.study=user", "search.allow_underpowered=true", command="evoharness.search")
    assert proc.returncode == 0, proc.stderr
    assert (project / "runs" / "user" / "summary.json").is_file()
