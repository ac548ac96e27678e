"""Ctrl-C while a command pays for episodes: the first one stops new work and lets what is in flight
finish, so the command can keep what ran; a second one aborts."""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from evoharness.compiler.atomic import print_whole


@contextlib.contextmanager
def ctrl_c_stops() -> Iterator[threading.Event]:
    """While an evaluation runs: the first Ctrl-C stops new episodes (those in flight finish, and the
    record is written with what ran); a second one aborts. Only the main thread can catch a signal:
    elsewhere (a sweep's job in a worker) Ctrl-C does what it did before."""
    stopping = threading.Event()

    def on_interrupt(signum: int, frame: object) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()
        print_whole("stopping: the episodes in flight finish, then the record is written with what ran (Ctrl-C again to abort)",
                    sys.stderr)

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:  # not the main thread
        yield stopping
        return
    try:
        yield stopping
    finally:
        signal.signal(signal.SIGINT, previous)
