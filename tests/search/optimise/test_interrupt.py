"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it: the launcher's worker
processes get it too) or SIGTERM to the search during a search: one line, exit 130, the lock
released, the batch in flight finished; the same command then resumes and meets the budget
exactly, with no trial left RUNNING."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from evoharness.search.optimise.study import distinct_evaluations

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ARGS = ["search.rounds=1", "search.trials_per_round=6", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]", "search.samples=1",
        "search.population_size=2", "search.max_front_dev=2", "search.resamples=2000"]


@pytest.mark.parametrize(("sig", "group"), [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_interrupt_then_resume(tmp_path: Path, sig: signal.Signals, group: bool) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "evoharness.search", f"runs_dir={tmp_path}", "search.study=cut", *ARGS]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    db = tmp_path / "cut" / "study.db"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        spend = tmp_path / "cut" / "spend.jsonl"
        if spend.exists() and len(spend.read_text(encoding="utf-8").splitlines()) >= 2:  # a few trials in: mid-round
            break
    assert proc.poll() is None, "the search ended before it could be interrupted"
    os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    lines = err.strip().splitlines()
    assert lines[-1] == "interrupted; resume with the same command" and "Traceback" not in err
    assert "stopping after the batch in flight" in err
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name="cut/r0", storage=f"sqlite:///{db}")
    assert distinct_evaluations(study) == 6 and not [t for t in study.trials if t.state.name == "RUNNING"]


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:  # it exited meanwhile
        return ""


def test_a_killed_search_leaves_no_worker_behind(tmp_path: Path) -> None:
    """SIGKILL to the search alone (the OOM killer's choice, `kill -9 PID`): its worker processes
    exit within seconds instead of idling for minutes, or finishing a job nothing can take."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "evoharness.search", f"runs_dir={tmp_path}", "search.study=cut", *ARGS]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    spend = tmp_path / "cut" / "spend.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (spend.exists() and spend.read_text(encoding="utf-8").strip()):
        time.sleep(0.3)
    # every process the search started (its workers, the server they are forked from, loky's
    # resource tracker): they share the search's process group
    group = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    workers = [pid for pid in group if pid != str(proc.pid)]
    forked = [pid for pid in workers if "forkserver" in _cmdline(pid)]
    assert proc.poll() is None and len(forked) >= 2, "the search ended, or forked no worker, before it could be killed"
    proc.kill()
    proc.wait()
    # a watcher notices within a second on an idle machine; a loaded one may take several to schedule
    # it, and a worker left to joblib would idle on for its 300 s timeout
    deadline = time.time() + 60
    while time.time() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.2)
    left = [f"{pid}: {_cmdline(pid)}" for pid in workers if Path(f"/proc/{pid}").exists()]
    assert not left, f"the killed search's processes outlived it by 60 s: {left}"


def test_a_stop_request_on_the_main_thread_installs_its_handlers_and_restores_them() -> None:
    from evoharness.search.optimise.sweeper import StopRequest

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert signal.getsignal(signal.SIGINT) is stop and signal.getsignal(signal.SIGTERM) is stop
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_stop_request_off_the_main_thread_leaves_the_handlers_alone() -> None:
    """A search run from a worker thread (a notebook's event loop runs a sync call in one): only the
    main thread may set signal handlers, so the request installs none there."""
    import threading

    from evoharness.search.optimise.sweeper import StopRequest

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def search() -> None:
        try:
            with StopRequest() as stop:
                seen.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), stop.requested))
        except BaseException as exc:  # what the thread raised, for the assertion below
            seen.append(exc)

    worker = threading.Thread(target=search)
    worker.start()
    worker.join(timeout=10)
    assert seen == [(*before, False)]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_search_that_ends_as_it_is_asked_to_stop_was_still_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's thread can see the request and end before request_stop returns (a loaded machine
    runs it while the request prints its line). The caller must still learn that a search was asked:
    a notebook's stop button otherwise re-raises the interrupt the search has already answered."""
    import io

    from evoharness.search.optimise.sweeper import StopRequest, request_stop

    stop = StopRequest()

    class EndsTheSearch(io.StringIO):
        def write(self, s: str) -> int:
            stop.__exit__(None, None, None)  # the search ends while the request is being printed
            return super().write(s)

    stop.__enter__()
    try:
        monkeypatch.setattr(sys, "stderr", EndsTheSearch())
        assert request_stop() is True and stop.requested
        assert request_stop() is False  # none running now
    finally:
        stop.__exit__(None, None, None)  # ended already, unless the request never printed
