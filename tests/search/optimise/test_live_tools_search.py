"""Live tools in a search: a tool labelled live with no replayed snapshot is refused before anything
is paid for, unless search.live_ok=true, and then every record names it. The doctor records the
holdout's tool outputs (its gold calls run the tools, no agent) without a holdout look, and a search
replays them with the service gone. The tool calls a real HTTP service on loopback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.compiler.workloads.test_tool_outputs import TOOLS, Flights
from tests.runs import ONE_AT_A_TIME


@pytest.fixture()
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flights)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()

SPLITS = {"train": [("SFO", "JFK"), ("LHR", "CDG"), ("NRT", "HND")], "dev": [("BER", "MUC"), ("AMS", "FCO")],
          "holdout": [("SYD", "MEL"), ("GRU", "EZE")]}


def setup(tmp: Path) -> None:
    (tmp / "flight_tools.py").write_text(TOOLS, encoding="utf-8")
    tasks = [{"id": f"trip_{o}_{d}", "split": split, "turns": [f"Find me a flight from {o} to {d} and book flight {o}{d}101."],
              "expected_calls": [[{"name": "search_flights", "arguments": {"origin": o, "destination": d}},
                                  {"name": "book", "arguments": {"flight": f"{o}{d}101"}}]],
              "expected_state": {"booked": [f"{o}{d}101"]}}
             for split, routes in SPLITS.items() for o, d in routes]
    (tmp / "flights.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")


def cli(tmp: Path, *args: str, mode: str | None, url: str = "http://127.0.0.1:9") -> subprocess.CompletedProcess[str]:
    tools = "[flight_tools.search_flights,flight_tools.book]"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(tmp), "FLIGHTS_URL": url}
    # a snapshot the doctor recorded holds the gold calls: an agent's call off the gold is a skip, never a live call
    lens = [f"+workload.options.tool_outputs={{path: {tmp / 'snap.json'}, mode: {mode}, on_miss: skip}}"] if mode else []
    return subprocess.run(
        [sys.executable, "-m", "evoharness", *args, f"runs_dir={tmp / 'runs'}", "cache_dir=null", "model=sim_large",
         "workload.name=tasks", "tool.source=null", f"tool.callables={tools}", "agent.tools=[search_flights,book]",
         "~workload.options.categories", f"+workload.options.path={tmp / 'flights.jsonl'}", f"+workload.options.tools={tools}", *lens],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


SEARCH = ("search", ONE_AT_A_TIME, "search.rounds=1", "search.trials_per_round=2", "search.population_size=2", "search.samples=1",
          "search.allow_underpowered=true", "search.teacher=null")


def test_a_live_tool_is_refused_in_a_search_unless_live_ok_and_then_every_record_names_it(tmp_path: Path, service: str) -> None:
    setup(tmp_path)
    refused = cli(tmp_path, *SEARCH, "search.study=live", mode=None, url=service)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 2 and len(errors) == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert errors[0].startswith("error: search.live_ok: tools ['search_flights'] are live and no tool-output snapshot replays them")
    assert "or set search.live_ok=true" in errors[0] and not (tmp_path / "runs" / "live").exists()  # nothing paid, nothing written

    allowed = cli(tmp_path, *SEARCH, "search.study=live", "search.live_ok=true", mode=None, url=service)
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]
    assert "warning: tools ['search_flights'] run live in this search" in allowed.stdout + allowed.stderr
    study = tmp_path / "runs" / "live"
    assert json.loads((study / "freeze.json").read_text(encoding="utf-8"))["live_tools"] == ["search_flights"]
    assert json.loads((study / "summary.json").read_text(encoding="utf-8"))["live_tools"] == ["search_flights"]

    live = cli(tmp_path, "evaluate", "workload.split=dev", mode=None, url=service)
    assert live.returncode == 0, live.stderr[-2000:]
    [record] = [json.loads(p.read_text(encoding="utf-8")) for p in (tmp_path / "runs" / "evaluate").rglob("eval.json")]
    assert record["live_tools"] == ["search_flights"]


def test_the_doctor_records_the_holdouts_tool_outputs_without_a_look_and_a_search_replays_them(tmp_path: Path, service: str) -> None:
    setup(tmp_path)
    recorded = cli(tmp_path, "doctor", mode="record", url=service)
    assert recorded.returncode == 0 and "gold replay passes PASS" in recorded.stdout, recorded.stdout[-2000:] + recorded.stderr[-2000:]
    outputs = json.loads((tmp_path / "snap.json").read_text(encoding="utf-8"))["outputs"].values()
    seen = {(e["arguments"]["origin"], e["arguments"]["destination"]) for e in outputs if e["tool"] == "search_flights"}
    assert set(SPLITS["holdout"]) <= seen and seen == {r for routes in SPLITS.values() for r in routes}
    assert not (tmp_path / "runs" / "registry" / "holdout_looks.jsonl").exists()  # running tools is no look at the holdout

    replayed = cli(tmp_path, *SEARCH, "search.study=replayed", mode="replay")  # FLIGHTS_URL points nowhere
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    study = tmp_path / "runs" / "replayed"
    frozen = json.loads((study / "freeze.json").read_text(encoding="utf-8"))
    assert "live_tools" not in frozen and len(frozen["tool_outputs_hash"]) == 64
    summary = json.loads((study / "summary.json").read_text(encoding="utf-8"))
    assert "live_tools" not in summary and summary["claim"]["hashes"]["tool_outputs"] == frozen["tool_outputs_hash"]
