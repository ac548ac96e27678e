"""One search per study at a time: the orchestrator holds an OS file lock on the study folder for
the whole run, and writes its pid beside it so a second process can say who holds it.

The lock is ``fcntl``-based (filelock's UnixFileLock), so it dies with its process: a killed search
leaves no stale lock, and the trials it left RUNNING belong to no live process, which is what makes
closing them on resume safe. It guards one filesystem; a study on a shared database searched from
two machines needs its runs_dir on a shared filesystem too.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from compiler.atomic import write_text_atomic
from compiler.errors import ConfigError

LOCK_FILE = ".search.lock"
OWNER_FILE = ".search.owner"


def _holder(study_dir: Path) -> str:
    try:
        return f"process {int((study_dir / OWNER_FILE).read_text(encoding='utf-8').split()[0])}"
    except (OSError, ValueError, IndexError):
        return "another process"


@contextlib.contextmanager
def study_lock(study_dir: Path, study: str) -> Iterator[None]:
    """Hold the study's lock, or raise a one-line ConfigError naming the holder's pid at once."""
    study_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(study_dir / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError("search.study", f"study {study!r} is being searched by {_holder(study_dir)} right now",
                          "wait for that search to finish (the same command then resumes it), or pick another search.study") from None
    try:
        write_text_atomic(study_dir / OWNER_FILE, f"{os.getpid()}\n")
        yield
    finally:
        with contextlib.suppress(OSError):
            (study_dir / OWNER_FILE).unlink()
        lock.release()
