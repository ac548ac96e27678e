"""A transcript is the conversation the provider was sent, message by message, with the model's last
reply after it, and holds no secret value: checked against the OpenAI-compatible stub on loopback,
which records every request it answered."""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from evoharness.search.records import transcripts
from tests.provider.stub import StubProvider, respond, serve
from tests.provider.test_real_path import PRICE_IN, PRICE_OUT, model, run

pytestmark = pytest.mark.slow  # a server: scheduled first (tests/conftest.py)

TEAM = "Qw7eR2tY9uI4oP1aS6dF3gH8jK5lZ0xCvBnM2qWe"
ROLE = "agent.prompt_sections.role='You are the order desk of team ${oc.env:DESK_TEAM_TOKEN}.'"


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    provider = StubProvider(key="sk-stub-0123456789abcdef")
    server = serve(provider)
    yield provider
    server.shutdown()
    server.server_close()


def shown(m: Mapping[str, Any]) -> dict[str, Any]:
    """A message as a transcript keeps it: role, text, the calls it asked for, the call it answers."""
    out: dict[str, Any] = {"role": m["role"], "content": str(m.get("content") or "")}
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                             for c in m["tool_calls"]]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    return out


def test_the_transcript_is_what_the_provider_saw_and_holds_no_secret(stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "evaluate", *model(stub, temperature=0.0), "workload.split=dev", "workload.limit=1", "workload.samples=1",
               ROLE, env={"DESK_TEAM_TOKEN": TEAM})
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = next((tmp_path / "runs").rglob("eval.json"))
    [t] = transcripts.read(record)
    answered = stub.answered()
    assert len(answered) >= 3  # the desk finds the orders, acts on one, then answers: a conversation, not one call
    last = answered[-1]
    # the user's own prompt went to the host their config named, secret and all: the transcript is what it was sent
    assert TEAM in json.dumps(last["messages"])
    expected = [shown(m) for m in last["messages"]] + [shown(respond(last))]
    expected = json.loads(json.dumps(expected).replace(TEAM, "${oc.env:DESK_TEAM_TOKEN}"))
    assert t["messages"] == expected
    assert t["messages"][0]["role"] == "system" and "${oc.env:DESK_TEAM_TOKEN}" in t["messages"][0]["content"]
    assert any(m["role"] == "tool" for m in t["messages"]) and any(m.get("tool_calls") for m in t["messages"])
    # one line per model call the provider billed, priced as it reported usage
    assert len(t["calls"]) == len(answered)
    assert t["cost_usd"] == pytest.approx(sum(c["prompt_tokens"] * PRICE_IN + c["completion_tokens"] * PRICE_OUT for c in t["calls"]))
    episode = json.loads(record.read_text(encoding="utf-8"))["episodes"][0]
    assert (t["task_id"], t["sample"], t["passed"], t["score"]) == (episode["task_id"], episode["sample"], episode["passed"],
                                                                    episode["score"])
    # no file the run wrote holds the value, compressed or not
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            plain = gzip.decompress(data) if path.name.endswith(".gz") else data
            assert TEAM.encode() not in plain, path


def test_a_warm_rerun_keeps_the_same_transcript(stub: StubProvider, tmp_path: Path) -> None:
    common = [*model(stub, temperature=0.0), "workload.split=dev", "workload.limit=2", "workload.samples=1"]
    assert run(tmp_path, "evaluate", *common).returncode == 0
    calls = stub.calls()
    assert run(tmp_path, "evaluate", *common).returncode == 0
    assert stub.calls() == calls  # replayed from the cache: nothing sent
    cold, warm = [transcripts.read(p) for p in sorted((tmp_path / "runs").rglob("eval.json"))]

    def conversation(ts: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [(t["task_id"], t["messages"]) for t in ts]

    assert len(cold) == 2 and conversation(cold) == conversation(warm)
    assert all(c["cached"] for t in warm for c in t["calls"]) and not any(c["cached"] for t in cold for c in t["calls"])
