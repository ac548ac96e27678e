"""Worker processes forked from one server that imported the job's modules once.

joblib's workers (loky) each start a fresh interpreter, and each pays every import again on its
first job: litellm alone is several CPU-seconds, times every worker, on the cores the evaluations
need. Started with the ``forkserver`` method instead, each worker is a fork of a server that
imported them once; the server holds no threads and no connections (it only imports), so the fork
is safe, and a worker still shares nothing with the search's own process."""
from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Sequence
from multiprocessing import forkserver

log = logging.getLogger(__name__)


def start_fork_server(preload: Sequence[str]) -> None:
    """Make forkserver loky's start method (unless something in this process already chose one) and
    start the server now, so that its imports run beside the search's own start-up."""
    from joblib.externals.loky.backend.context import get_start_method, set_start_method

    if get_start_method() not in (None, "forkserver"):
        log.debug("loky's start method is already %s: workers import for themselves", get_start_method())
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))  # no effect once it runs
    set_start_method("forkserver", force=True)
    forkserver.ensure_running()
