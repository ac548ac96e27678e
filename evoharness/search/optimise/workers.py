"""Worker processes forked from one server that imported the job's modules once.

joblib's workers (loky) each start a fresh interpreter, and each pays every import again on its
first job: litellm alone is several CPU-seconds, times every worker, on the cores the evaluations
need. Started with the ``forkserver`` method instead, each worker is a fork of a server that
imported them once and runs no Python thread (a BLAS pool, if numpy's allows more than one
thread, is re-made by the library after a fork), and a worker still shares nothing with the
search's process. Two things a loky worker gets from loky reach these through the server's
environment instead, set when it starts: the search's pid (a worker's parent is the server, so the
worker watches the search itself, evoharness.search.optimise.trial.job_signals) and joblib's per-worker
thread limits for OpenMP/BLAS (loky cannot pass them to a forkserver process)."""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from multiprocessing import forkserver

from evoharness.search.optimise.trial import SEARCH_PID_ENV

log = logging.getLogger(__name__)


def start_fork_server(preload: Sequence[str], *, n_jobs: int) -> bool:
    """Make forkserver loky's start method and start the server now, so that its imports run beside
    the search's own start-up. Not done (False; workers import for themselves) where it cannot help
    or is not safe: one job at a time, a start method something in this process already chose
    (loky's, or joblib's JOBLIB_START_METHOD), no fork server (Windows), or macOS, where a fork
    after litellm's import (it reads the system's proxy settings) can crash the child."""
    from joblib import effective_n_jobs
    from joblib.externals.loky.backend.context import get_start_method, set_start_method

    workers = effective_n_jobs(n_jobs)
    chosen = get_start_method() or os.environ.get("JOBLIB_START_METHOD")
    if workers <= 1 or chosen not in (None, "", "forkserver") or sys.platform == "darwin" \
            or "forkserver" not in multiprocessing.get_all_start_methods():
        log.debug("workers start with loky's own method: n_jobs=%s, start method %s, %s", n_jobs, chosen, sys.platform)
        return False
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))  # no effect once it runs
    set_start_method("forkserver", force=True)
    with _server_environment(workers):
        forkserver.ensure_running()
    return True


@contextlib.contextmanager
def _server_environment(workers: int) -> Iterator[None]:
    """What the server's environment adds to the search's, for the time it takes to start it."""
    from joblib import cpu_count
    from joblib.parallel import LokyBackend

    threads = str(max(cpu_count() // workers, 1))  # joblib's own default for a loky worker
    extra = {SEARCH_PID_ENV: str(os.getpid()),
             **{var: os.environ.get(var, threads) for var in LokyBackend.MAX_NUM_THREADS_VARS}}
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
