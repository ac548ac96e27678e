"""One search per study at a time: the orchestrator holds an OS file lock on the study folder for
the whole run, and writes its pid beside it so a second process can say who holds it.

The lock is ``fcntl``-based (filelock's UnixFileLock), so it dies with its process: a killed search
leaves no stale lock, and the trials it left RUNNING belong to no live process, which is what makes
closing them on resume safe. A file lock guards one filesystem only, so a study in a shared
database (PostgreSQL, MySQL) is also locked in the database itself: a session-level advisory lock
held on a connection of its own for the whole run. The server drops it when that connection ends,
however the process ended, so it too leaves nothing stale, and it reaches every machine that
reaches the database.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.errors import ConfigError

LOCK_FILE = ".search.lock"
OWNER_FILE = ".search.owner"


def _holder(owner: Path) -> str:
    try:
        return f"process {int(owner.read_text(encoding='utf-8').split()[0])}"
    except (OSError, ValueError, IndexError):
        return "another process"


@contextlib.contextmanager
def study_lock(study_dir: Path, study: str, *, lock_file: str = LOCK_FILE, owner_file: str = OWNER_FILE,
               what: str = "") -> Iterator[None]:
    """Hold the study's lock, or raise a one-line ConfigError naming the holder's pid at once."""
    study_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(study_dir / lock_file), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        through = f" through {what}" if what else ""
        raise ConfigError("search.study", f"study {study!r} is being searched{through} by {_holder(study_dir / owner_file)} right now",
                          "wait for that search to finish (the same command then resumes it), or pick another search.study") from None
    try:
        write_text_atomic(study_dir / owner_file, f"{os.getpid()}\n")
        yield
    finally:
        with contextlib.suppress(OSError):
            (study_dir / owner_file).unlink()
        lock.release()


def _lock_key(study: str) -> int:
    """A signed 64-bit key for PostgreSQL's advisory locks, the same on every machine."""
    return int.from_bytes(hashlib.sha256(f"evoharness-study:{study}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def storage_lock(url: str, study: str) -> Iterator[None]:
    """Hold the study's lock in its database (PostgreSQL, MySQL/MariaDB), or raise a one-line
    ConfigError naming the holder. A SQLite file is locked beside itself: the folder lock covers only
    one output folder, and two searches from two folders may name the same file."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    backend = make_url(url).get_backend_name()
    if backend == "sqlite" and make_url(url).database:
        database = Path(str(make_url(url).database)).absolute()
        with study_lock(database.parent, study, lock_file=f".{database.name}.lock", owner_file=f".{database.name}.owner",
                        what=f"the study database {database}"):
            yield
        return
    if backend not in ("postgresql", "mysql", "mariadb"):
        yield
        return
    me = f"evoharness search {study} pid {os.getpid()} on {socket.gethostname()}"[:63]
    # keepalives: a holder whose machine vanished stops holding the lock within a minute or two,
    # not after the kernel's default of hours
    connect_args: dict[str, Any] = ({"application_name": me, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                                     "keepalives_count": 3} if backend == "postgresql" else {})
    engine = create_engine(url, poolclass=_null_pool(), connect_args=connect_args)
    conn = engine.connect()
    try:
        if backend == "postgresql":
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _lock_key(study)}).scalar()
        else:
            # lock names are server-wide: the database is part of the name, hashed to MySQL's 64 characters
            name = hashlib.sha256(f"{make_url(url).database}/{study}".encode()).hexdigest()[:48]
            got = conn.execute(text("SELECT GET_LOCK(:k, 0)"), {"k": f"evoharness:{name}"}).scalar()
        conn.commit()  # the lock is the session's, not the transaction's: nothing is left open
        if not got:
            raise ConfigError("search.study", f"study {study!r} is being searched by {_db_holder(conn, backend, study)} right now "
                              "(it holds the study's lock in the shared storage)",
                              "wait for that search to finish (the same command then resumes it), or pick another search.study")
        yield
    finally:
        with contextlib.suppress(Exception):
            conn.close()  # closing the session releases its advisory lock
        engine.dispose()


def _null_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


def _db_holder(conn: Any, backend: str, study: str) -> str:
    from sqlalchemy import text

    if backend != "postgresql":
        return "another orchestrator"
    try:
        row = conn.execute(text(
            "SELECT a.application_name, a.client_addr FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND ((l.classid::bigint << 32) | l.objid::bigint) = :k"),
            {"k": _lock_key(study)}).first()
    except Exception:
        return "another orchestrator"
    if row is None:
        return "another orchestrator"
    name, addr = row
    return f"{name or 'another orchestrator'}" + (f" (from {addr})" if addr else "")
