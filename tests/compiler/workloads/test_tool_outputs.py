"""Tool-output snapshots on a live tool: the tool calls a real HTTP service on 127.0.0.1 started
here, which answers with a timestamp and a random order. A recording evaluation stores what it
answered; with the service stopped, two replays give identical episodes. A replay miss is one
line (exit 2) or a skipped episode, never a live call."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]

TOOLS = '''\
"""A live flight search (a service on loopback) and a booking that changes the state."""
import json
import os
import urllib.request

from evoharness.compiler.callables import tool


@tool(live=True, group="travel")
def search_flights(origin: str, destination: str) -> str:
    """Search today's flights.

    Args:
        origin: Three-letter airport code to fly from.
        destination: Three-letter airport code to fly to.
    """
    url = f"{os.environ['FLIGHTS_URL']}/search?origin={origin}&destination={destination}"
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode("utf-8")


@tool(mutates_state=True, group="travel")
def book(flight: str, state: dict) -> str:
    """Book a flight.

    Args:
        flight: The flight number, as search_flights lists it.
    """
    state.setdefault("booked", []).append(flight)
    return f"booked {flight}"
'''


class Flights(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        q = parse_qs(urlparse(self.path).query)
        flights = [f"{q['origin'][0]}{q['destination'][0]}{n}" for n in (101, 202, 303)]
        random.shuffle(flights)  # a live service: the order and the clock change from call to call
        body = json.dumps({"as_of": time.time(), "flights": flights}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flights)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


ROUTES = [("SFO", "JFK"), ("LHR", "CDG"), ("NRT", "HND"), ("BER", "MUC")]


def setup(tmp: Path, routes: list[tuple[str, str]]) -> Path:
    (tmp / "flight_tools.py").write_text(TOOLS, encoding="utf-8")
    tasks = [{"id": f"trip_{o}_{d}", "split": "dev", "turns": [f"Find me a flight from {o} to {d}."],
              "expected_calls": [[{"name": "search_flights", "arguments": {"origin": o, "destination": d}}]]} for o, d in routes]
    path = tmp / "flights.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in tasks) + "\n", encoding="utf-8")
    return path


def evaluate(tmp: Path, mode: str, *, url: str = "http://127.0.0.1:9", on_miss: str = "error",
             out: str = "runs", extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    tools = "[flight_tools.search_flights,flight_tools.book]"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(tmp), "FLIGHTS_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "evoharness", "evaluate",
         f"runs_dir={tmp / out}", "cache_dir=null", "model=sim_large", "workload.name=tasks", "tool.source=null",
         f"tool.callables={tools}", "agent.tools=[search_flights,book]",
         "~workload.options.categories", f"+workload.options.path={tmp / 'flights.jsonl'}", f"+workload.options.tools={tools}",
         f"+workload.options.tool_outputs={{path: {tmp / 'flights.snapshot.json'}, mode: {mode}, on_miss: {on_miss}}}", *extra],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def episodes(tmp: Path, out: str) -> list[dict[str, Any]]:
    [path] = list((tmp / out).rglob("eval.json"))
    report = json.loads(path.read_text(encoding="utf-8"))
    keep = ("task_id", "passed", "score", "status", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens", "detail")
    return [{k: e.get(k) for k in keep} for e in report["episodes"]]


def test_record_then_replay_without_the_service(tmp_path: Path, service: str) -> None:
    setup(tmp_path, ROUTES)
    rec = evaluate(tmp_path, "record", url=service, out="rec")
    assert rec.returncode == 0, rec.stderr[-2000:]
    snapshot = json.loads((tmp_path / "flights.snapshot.json").read_text(encoding="utf-8"))
    recorded = {(e["arguments"]["origin"], e["arguments"]["destination"]) for e in snapshot["outputs"].values()}
    assert recorded == set(ROUTES) and all("as_of" in e["output"] for e in snapshot["outputs"].values())
    # the service's answers really do change: a replay is not the same as calling it again
    from urllib.request import urlopen

    live = {urlopen(f"{service}/search?origin=SFO&destination=JFK").read() for _ in range(4)}
    assert len(live) > 1
    before = (tmp_path / "flights.snapshot.json").read_bytes()
    first, second = evaluate(tmp_path, "replay", out="a"), evaluate(tmp_path, "replay", out="b")  # FLIGHTS_URL points nowhere
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    a, b = episodes(tmp_path, "a"), episodes(tmp_path, "b")
    assert a == b and len(a) == len(ROUTES) and all(e["status"] == "scored" for e in a)
    assert (tmp_path / "flights.snapshot.json").read_bytes() == before  # replay never writes


def test_a_replay_miss_is_one_line_or_a_skip_never_a_live_call(tmp_path: Path, service: str) -> None:
    setup(tmp_path, ROUTES[:2])
    assert evaluate(tmp_path, "record", url=service, out="rec").returncode == 0
    setup(tmp_path, ROUTES)  # two tasks the snapshot never saw
    miss = evaluate(tmp_path, "replay", url=service, out="miss")
    errors = [line for line in miss.stderr.splitlines() if line.startswith("error:")]
    assert miss.returncode == 2 and len(errors) == 1 and "Traceback" not in miss.stderr and "never awaited" not in miss.stderr, miss.stderr
    assert not list((tmp_path / "miss").rglob("eval.json"))  # nothing half-written
    assert "has no output for search_flights(" in miss.stderr and "tool_outputs.mode=record" in miss.stderr
    # half the episodes skipped is more than a run may lose by default: it fails, naming the miss
    lost = evaluate(tmp_path, "replay", url=service, on_miss="skip", out="lost")
    assert lost.returncode == 1 and "2 of 4 episodes were skipped" in lost.stderr and "has no search_flights" in lost.stderr
    skip = evaluate(tmp_path, "replay", url=service, on_miss="skip", out="skip", extra=("workload.max_skip_rate=1.0",))
    assert skip.returncode == 0, skip.stderr[-2000:]
    rows = episodes(tmp_path, "skip")
    assert sorted(e["status"] for e in rows) == ["scored", "scored", "skipped", "skipped"]


def test_the_replayed_snapshot_is_part_of_the_workload_hash(tmp_path: Path, service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.compiler.workloads.tasks.workload import TasksFileWorkload
    from evoharness.search.records.doctor_record import workload_hash

    setup(tmp_path, ROUTES[:1])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FLIGHTS_URL", service)
    tools = ["flight_tools.search_flights", "flight_tools.book"]
    snap = {"path": str(tmp_path / "s.json")}
    rec = TasksFileWorkload(path=str(tmp_path / "flights.jsonl"), tools=tools, tool_outputs={**snap, "mode": "record"})
    env = rec.make_environment(rec.task("tasks/trip_SFO_JFK"), seed=0)
    env.call("search_flights", {"origin": "SFO", "destination": "JFK"})
    replay = TasksFileWorkload(path=str(tmp_path / "flights.jsonl"), tools=tools, tool_outputs={**snap, "mode": "replay"})
    first = workload_hash(replay, {}, tools=[], max_turns=12)
    env.call("search_flights", {"origin": "SFO", "destination": "LAX"})  # recording more changes what a replay serves
    again = TasksFileWorkload(path=str(tmp_path / "flights.jsonl"), tools=tools, tool_outputs={**snap, "mode": "replay"})
    assert replay.tool_outputs_hash != again.tool_outputs_hash and workload_hash(again, {}, tools=[], max_turns=12) != first
    with pytest.raises(ValueError, match="no snapshot at"):
        TasksFileWorkload(path=str(tmp_path / "flights.jsonl"), tools=tools, tool_outputs={"path": str(tmp_path / "none.json")})


def test_a_recording_that_cannot_be_stored_is_refused_before_any_episode(tmp_path: Path) -> None:
    from evoharness.compiler.errors import ConfigError
    from evoharness.compiler.runtime.tool_outputs import ToolOutputs

    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        ToolOutputs(tmp_path / "folder", mode="record")
    with pytest.raises(ConfigError, match="cannot write a snapshot in /proc"):
        ToolOutputs("/proc/evoharness/x.json", mode="record")
    lens = ToolOutputs(tmp_path / "s.json", mode="record")
    lens.put("t", {"a": 1}, "first")
    lens.put("t", {"a": 1}, "second")  # a re-recording keeps what the model saw last
    assert ToolOutputs(tmp_path / "s.json", mode="replay").get("t", {"a": 1}) == "second"
