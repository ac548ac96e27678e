"""What the tests that start their own servers (Redis, PostgreSQL, a Ray head, a Submitit pool) need
from the machine. Where a program is missing, a test fails under CI (CI=true: scripts/test installs
every one there), and elsewhere is skipped with one line naming what to install, so that the test
command passes on a machine without them and CI cannot pass by skipping."""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(what: str, fix: str) -> NoReturn:
    """``what`` this test needs is not on this machine, and ``fix`` is how to get it."""
    if in_ci():
        pytest.fail(f"{what}: {fix}. CI is set, where a server-backed test may not be skipped", pytrace=False)
    pytest.skip(f"{what}: {fix}")


def debian_program(name: str, package: str, *, folders: str = "") -> str:
    """The path of the program ``name`` that Debian's ``package`` installs: on PATH, or in ``folders``
    (a glob, for packages that keep their programs off PATH; the newest version is taken)."""
    found = (sorted(glob.glob(os.path.join(folders, name))) if folders else []) or [shutil.which(name)]
    if found[-1] is None:
        missing(f"{name} not found", f"install Debian's {package} package (apt-get install {package})")
    return found[-1]


def python_program(name: str) -> str:
    """The path of ``name``, a program a package of the dev extras installs beside this Python."""
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        missing(f"{name} not found beside {sys.executable}", "install the dev extras (scripts/test does: pip install -e '.[dev]')")
    return str(path)


def hydra_launcher(module: str, install: str) -> None:
    """Hydra's launcher plugin ``module`` (hydra_plugins.<module>) is importable; ``install`` is how to get it."""
    if importlib.util.find_spec(f"hydra_plugins.{module}") is None:
        missing(f"Hydra's launcher plugin {module} is not installed", install)
