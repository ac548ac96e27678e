"""The search on a shared PostgreSQL storage: a throwaway server (Debian's postgresql binaries,
initdb + pg_ctl, password authentication on 127.0.0.1) started and stopped by the test. The search
reads its URL from the environment (search.storage='${oc.env:EVO_STORAGE}'), is SIGKILLed mid-round
and resumed: the finished trials are kept as they were, the budget is met exactly, and the password
lands in no file. A second orchestrator on the same study, from another runs_dir (as another machine
would be), is refused by the lock the first holds in the database itself."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from evoharness.search.optimise.study import distinct_evaluations
from tests.servers import debian_program

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "pg-Secret-7f3a9c1e55"  # no provider key shape: only the by-value scrub can keep it out of files
ARGS = ["search.study=pg", "search.rounds=1", "search.trials_per_round=6", "mutators.enabled=[]", "search.train_limit=4",
        "workload.options.categories=[multi_turn_base]", "+workload.options.limit_per_split=12", "search.samples=1",
        "search.allow_underpowered=true",  # 12 holdout tasks: a storage test, not a claim
        "search.population_size=2",
        "search.max_front_dev=2", "search.resamples=2000", "search.storage=${oc.env:EVO_STORAGE}"]


def _bin(name: str) -> str:
    return debian_program(name, "postgresql", folders="/usr/lib/postgresql/*/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 with a password-protected database; yields its SQLAlchemy URL."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    # not under pytest's temp root: that one is private to root, and the server may run as postgres
    root = Path(tempfile.mkdtemp(prefix="evoharness-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    (root / "pw").write_text(PASSWORD + "\n", encoding="utf-8")
    # the server refuses to run as root: as root, it runs as Debian's postgres user
    as_user: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for p in (root, sockets, root / "pw"):
            os.chown(p, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "evo", "--auth=scram-sha-256", f"--pwfile={root / 'pw'}",
                    "-E", "UTF8", "--no-instructions"], check=True, capture_output=True)
    port = _free_port()
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(root / "log"), "-o",
                    f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sockets} -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        base = f"postgresql+psycopg://evo:{PASSWORD}@127.0.0.1:{port}"
        import sqlalchemy

        engine = sqlalchemy.create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("CREATE DATABASE evo"))
        engine.dispose()
        yield f"{base}/evo"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def command(runs: Path, url: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "EVO_STORAGE": url}
    return [sys.executable, "-m", "evoharness.search", f"runs_dir={runs}", *ARGS], env


def test_a_search_on_postgres_is_killed_and_resumed_exactly(postgres: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cmd, env = command(runs, postgres)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    storage = postgres
    done: list[optuna.trial.FrozenTrial] = []
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        if not (runs / "pg" / "spend.jsonl").exists():  # the study exists (and a batch is paid) once it does
            continue
        done = [t for t in optuna.load_study(study_name="pg/r0", storage=storage).trials if t.state.name == "COMPLETE"]
        if len(done) >= 2:
            break

    # a second orchestrator, from another runs_dir (its own file lock is free): the database refuses it.
    # The first is paused meanwhile, holding its session (and so its lock) but unable to finish
    # before the second has started, however slow that start is on a loaded machine.
    assert proc.poll() is None, "the first search ended before a second could try it"
    os.killpg(proc.pid, signal.SIGSTOP)
    other, other_env = command(tmp_path / "elsewhere", postgres)
    second = subprocess.run(other, cwd=ROOT, env=other_env, capture_output=True, text=True, timeout=300)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(done) >= 2, f"the search did not get far enough to be killed: {proc.stderr.read() if proc.stderr else ''}"[-2000:]
    assert second.returncode == 2, second.stderr[-2000:]
    line = second.stderr.strip().splitlines()[-1]
    assert "study 'pg' is being searched by evoharness search pg pid" in line and "shared storage" in line, line
    assert "Traceback" not in second.stderr and PASSWORD not in second.stderr

    kept = {t.number: t.datetime_complete for t in done}
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name="pg/r0", storage=storage)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert all(next(t for t in complete if t.number == n).datetime_complete == when for n, when in kept.items())
    assert distinct_evaluations(study) == 6, "the killed trials must not use up the budget"
    assert not any(t.state.name == "RUNNING" for t in study.trials)
    summary = json.loads((runs / "pg" / "summary.json").read_text(encoding="utf-8"))
    assert summary["storage"].startswith("postgresql+psycopg://evo:***@127.0.0.1:")
    # the password is in no file the search wrote, and in neither run's output
    leaked = [p for p in runs.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert leaked == [] and PASSWORD not in again.stdout + again.stderr
    # the lock went with the killed process and with the finished one: a third run just reads back
    third = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    assert len(optuna.load_study(study_name="pg/r0", storage=storage).trials) == len(study.trials)
