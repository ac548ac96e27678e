"""An example installed the way a plugin's user installs it: pip, from a copy of its folder (pip
builds in the source tree, so the repository's stays clean), into a folder of its own that goes
on PYTHONPATH."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def install(example: str, work: Path) -> tuple[Path, Path]:
    """The copied source folder and the site folder the example is installed into."""
    source = work / "src"
    shutil.copytree(EXAMPLES / example, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    site = work / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(site.glob("*.dist-info/entry_points.txt")), f"{example} installed no entry points"
    return source, site
