"""The response cache's writer thread: every reply handed over is stored, in order, a failing
backend costs an entry and never the run, and nothing waits on it but ``flush``."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from evoharness.compiler.runtime.cache import ResponseCache, WriteBehind

REPLY = {"content": "hi", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1,
         "latency_s": 0.1, "cost_usd": 0.0, "attempts": 1, "infra_s": 0.0}


def test_flush_returns_once_every_entry_is_stored_and_the_thread_ends(tmp_path: Path) -> None:
    writes = WriteBehind(ResponseCache(tmp_path))
    keys = [f"{i:064x}" for i in range(300)]
    for i, key in enumerate(keys):
        writes.put(key, {**REPLY, "content": str(i)})
    thread = writes._thread
    assert isinstance(thread, threading.Thread) and thread.name == "evoharness-cache-writer" and not thread.daemon
    writes.flush()
    assert [ResponseCache(tmp_path).get(k)["content"] for k in keys] == [str(i) for i in range(300)]  # type: ignore[index]
    thread.join(timeout=60)  # it ends at once; the bound only keeps a hang from hanging the suite
    assert not thread.is_alive() and writes._thread is None  # told to end: it does not idle on
    writes.flush()  # nothing queued: returns at once
    writes.put("ab" * 32, REPLY)  # a write after a flush starts the thread again
    writes.flush()
    assert ResponseCache(tmp_path).get("ab" * 32) == REPLY


def test_the_same_key_twice_keeps_the_later_reply(tmp_path: Path) -> None:
    writes = WriteBehind(ResponseCache(tmp_path))
    for i in range(50):
        writes.put("cd" * 32, {**REPLY, "content": str(i)})
    writes.flush()
    assert ResponseCache(tmp_path).get("cd" * 32)["content"] == "49"  # type: ignore[index]


class Failing:
    """A backend that stores in ``folder`` but raises ``error`` for keys starting with 0."""

    remote = False

    def __init__(self, folder: ResponseCache, error: BaseException) -> None:
        self.folder, self.error = folder, error

    def get(self, key: str) -> None:
        return None

    def put(self, key: str, value: Any) -> None:
        if key.startswith("0"):
            raise self.error
        self.folder.put(key, value)


def test_a_backend_that_raises_loses_that_entry_only(tmp_path: Path, caplog: Any) -> None:
    folder = ResponseCache(tmp_path)
    writes = WriteBehind(Failing(folder, RuntimeError("backend broke")))
    writes.put("0" * 64, REPLY)
    writes.put("1" * 64, REPLY)
    writes.flush()
    assert folder.get("1" * 64) == REPLY and folder.get("0" * 64) is None
    assert any("0" * 64 in r.getMessage() and "backend broke" in r.getMessage() for r in caplog.records)


def test_the_writer_idles_out_without_a_flush(tmp_path: Path) -> None:
    writes = WriteBehind(ResponseCache(tmp_path))
    writes.put("ef" * 32, REPLY)
    deadline = time.monotonic() + 60  # IDLE_S (0.5 s) on an idle machine; a loaded one may not schedule it for seconds
    while writes._thread is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writes._thread is None, f"the writer did not end within 60 s of its last entry (it idles out after {WriteBehind.IDLE_S} s)"
    assert ResponseCache(tmp_path).get("ef" * 32) == REPLY


def test_a_process_that_exits_without_a_flush_still_stores_what_it_handed_over(tmp_path: Path) -> None:
    code = ("import sys; from evoharness.compiler.runtime.cache import ResponseCache, WriteBehind; "
            f"w = WriteBehind(ResponseCache(sys.argv[1])); [w.put(f'{{i:064x}}', {json.dumps(REPLY)!s}) for i in range(200)]")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60, cwd=Path(__file__).resolve().parents[3])
    assert all(ResponseCache(tmp_path).get(f"{i:064x}") == REPLY for i in range(200))


def test_no_thread_to_be_had_writes_the_entry_in_the_caller(tmp_path: Path, monkeypatch: Any) -> None:
    writes = WriteBehind(ResponseCache(tmp_path))

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    writes.put("ab" * 32, REPLY)
    monkeypatch.undo()
    assert ResponseCache(tmp_path).get("ab" * 32) == REPLY and writes._thread is None
    writes.put("cd" * 32, REPLY)
    writes.flush()  # returns: nothing waits on a thread that never ran
    assert ResponseCache(tmp_path).get("cd" * 32) == REPLY


def test_a_writer_killed_by_a_base_exception_is_replaced_and_flush_returns(tmp_path: Path) -> None:
    folder = ResponseCache(tmp_path)
    writes = WriteBehind(Failing(folder, SystemExit("backend quit")))
    for k in ("0" * 64, "1" * 64, "2" * 64):
        writes.put(k, REPLY)
    done = threading.Event()
    threading.Thread(target=lambda: (writes.flush(), done.set()), daemon=True).start()
    assert done.wait(timeout=60), "flush hung after the writer died"
    assert folder.get("1" * 64) == REPLY and folder.get("2" * 64) == REPLY and folder.get("0" * 64) is None


def test_a_long_name_that_the_temp_suffix_would_make_too_long_is_still_written(tmp_path: Path) -> None:
    from evoharness.compiler.atomic import write_text_atomic

    target = tmp_path / ("n" * 240)
    write_text_atomic(target, "x\n", fsync=False)
    assert target.read_text() == "x\n" and not list(tmp_path.glob(".*.tmp"))
