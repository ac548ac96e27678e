"""Atomic writes: a reader (or a crash) sees the old file or the whole new one, never half; and a
job's output line reaches a stream shared with other jobs whole."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TextIO

_HOST = socket.gethostname()


def _open_beside(target: Path) -> tuple[int, str]:
    """A new temp file beside ``target`` under a name no other writer uses at the same time (this
    host, process and thread): mkstemp's random names cost a search's thousands of small writes
    three times as much. A name left by a killed writer that had the same pid and thread, or a
    name the suffix makes too long, falls back to mkstemp."""
    tmp = target.parent / f".{target.name}.{_HOST}-{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), str(tmp)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENAMETOOLONG):  # taken, or a long name made too long by the suffix
            raise
        return tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)


def write_text_atomic(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> Path:
    """Write to a temp file beside ``path``, fsync, then os.replace; the temp file never outlives a failure.
    Remembered secret values are scrubbed: no file the project writes holds one (compiler/secrets.py).
    ``fsync=False`` is for files a reader checks and can rebuild (a response-cache entry): the rename
    still means no reader sees half a file, but a power cut may leave an empty one."""
    from evoharness.compiler.secrets import scrub

    return write_bytes_atomic(path, scrub(text).encode("utf-8"), fsync=fsync)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> Path:
    """``write_text_atomic`` for bytes the caller has already scrubbed (a compressed file cannot be
    scrubbed here)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _open_beside(target)
    try:
        os.fchmod(fd, 0o644)  # whatever the umask (and mkstemp's 0600): outputs are shared like any other file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def print_whole(text: str, file: TextIO | None = None) -> None:
    """``text`` and its newline in one write, flushed at once. A multirun's jobs run in parallel
    processes that share the command's stdout and stderr, and ``print`` writes the text and its end
    separately: on an unbuffered stream (PYTHONUNBUFFERED=1, as many CI images set) another job's
    line can land between the two and two lines merge into one. A write of up to PIPE_BUF bytes
    (4096 on Linux) reaches a pipe in one piece."""
    out = sys.stdout if file is None else file
    out.write(text + "\n")
    out.flush()


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1, fsync: bool = True) -> Path:
    """JSON with key order kept: mapping order is data here (prompt sections are ordered)."""
    return write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n", fsync=fsync)


def unwritable(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """Why ``path`` is not, and cannot be created as, a folder this process may write, as (the
    nearest existing ancestor, the reason: "file" when that ancestor is a file), or None when it
    can. Nothing is created: a probe folder is made and removed in the ancestor."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        return probe, "file"
    try:  # the one reliable test (root passes os.access; /proc and read-only mounts refuse mkdir)
        os.rmdir(tempfile.mkdtemp(prefix=".evoharness-probe-", dir=probe))
    except OSError as exc:
        return probe, str(exc.strerror or exc)
    return None
