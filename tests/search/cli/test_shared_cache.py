"""One response cache for machines that share no folder: a Redis server (Debian's redis-server,
password-protected, on 127.0.0.1) started and stopped by the test. An evaluation run from one
folder fills it; the same evaluation from another folder, with no cache folder anywhere, replays
every call from it (0 billed tokens, the same metrics), and the password lands in no file. A
damaged entry is a miss, and a server that goes away mid-run costs one warning, not the run."""
from __future__ import annotations

import json
import logging
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evoharness.search.cli.main import main
from tests.servers import debian_program

PASSWORD = "rd-Secret-4b81e0aa"  # read from REDIS_PASSWORD only: never in the URL, so never in the config a record keeps
ARGS = ["model=sim_small", "workload.limit=2", "workload.samples=1", "workload.options.categories=[multi_turn_base]"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(folder: Path, port: int) -> subprocess.Popen[bytes]:
    exe = debian_program("redis-server", "redis-server")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(folder), "--requirepass", PASSWORD], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD)
    deadline = time.monotonic() + 60  # it answers in milliseconds; a loaded machine can take seconds to start it
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            time.sleep(0.05)
    code = proc.poll()
    proc.kill()
    pytest.fail(f"redis-server on 127.0.0.1:{port} exited with code {code}: another process may have taken the port; run the test again"
                if code is not None else f"redis-server on 127.0.0.1:{port} did not answer within 60 s: is the machine overloaded?")


@pytest.fixture()
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    monkeypatch.setenv("REDIS_PASSWORD", PASSWORD)
    port = _free_port()
    folder = tmp_path / "redis"
    folder.mkdir()
    proc = _start(folder, port)
    try:
        yield f"redis://127.0.0.1:{port}/0", port
    finally:
        proc.kill()
        proc.wait(10)


def _evaluate(where: Path, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    where.mkdir()
    monkeypatch.chdir(where)  # another folder each time, as another machine would be
    assert main(["evaluate", *ARGS, f"cache_dir={url}", f"runs_dir={where / 'runs'}"]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("eval: "))
    return json.loads(Path(line.removeprefix("eval: ")).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_two_folders_share_one_redis_cache(tmp_path: Path, server: tuple[str, int], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import redis

    url, port = server
    cold = _evaluate(tmp_path / "a", url, monkeypatch, capsys)
    stored = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD).keys("evoharness:reply:*")
    calls = sum(int(e["model_calls"]) for e in cold["episodes"])
    assert cold["billing"]["billed_tokens"] > 0 and len(stored) == calls > 0  # one entry per call, all in Redis
    episodes = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD).keys("evoharness:episode:*")
    assert len(episodes) == len(cold["episodes"])  # each finished episode kept beside its replies, for a warm replay
    warm = _evaluate(tmp_path / "b", url, monkeypatch, capsys)
    assert warm["billing"]["billed_tokens"] == 0 and warm["billing"]["billed_cost"] == 0
    assert warm["billing"]["cost_if_uncached"] == pytest.approx(cold["billing"]["cost_if_uncached"])
    for k in ("pass_rate", "cost_per_task", "latency_p95", "tokens_per_task"):
        assert warm["metrics"][k] == cold["metrics"][k], k
    assert warm["config"]["cache_dir"] == url  # the location is kept, and it holds no password
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "redis" not in p.parts]
    assert written and not [p for p in written if PASSWORD.encode() in p.read_bytes()]
    assert not [p for p in tmp_path.rglob("cache") if p.is_dir()]  # no cache folder on either "machine"


def test_a_damaged_entry_is_a_miss_and_a_lost_server_one_warning(tmp_path: Path, server: tuple[str, int],
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import redis

    from evoharness.compiler.runtime.cache import open_cache

    url, port = server
    cache = open_cache(url)
    assert cache.remote
    reply = {"content": "hi", "tool_calls": [], "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1,
             "cost_usd": 0.001, "latency_s": 0.2, "attempts": 1, "infra_s": 0.0}
    cache.put("k1", reply)
    assert cache.get("k1") == reply and cache.get("k2") is None
    redis.Redis(host="127.0.0.1", port=port, password=PASSWORD).set("evoharness:reply:k3", b"{truncated")
    with caplog.at_level(logging.WARNING):
        assert cache.get("k3") is None
    assert "is not a model reply" in caplog.text
    episode = {"version": 1, "kind": "episode", "replies": ["k1"]}
    cache.put_episode("e1", episode)  # type: ignore[attr-defined]
    assert cache.get_episode("e1") == episode and cache.get_episode("k1") is None  # type: ignore[attr-defined]
    assert cache.has_all(["k1", "k1"]) and not cache.has_all(["k1", "k2"]) and cache.has_all([])  # type: ignore[attr-defined]
    gone = open_cache(f"redis://127.0.0.1:{_free_port()}/0")  # nothing listens there: a server that went away
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert gone.get("k1") is None
        gone.put("k1", reply)
        assert gone.get("k1") is None
        assert not gone.has_all(["k1"]) and gone.get_episode("e1") is None  # type: ignore[attr-defined]
    assert len([r for r in caplog.records if "replies are not cached" in r.getMessage()]) == 1
