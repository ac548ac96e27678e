"""``model.timeout_s`` bounds a whole attempt, not each read: a server that sends its reply a byte at a
time runs into the deadline, the attempt is an outage (retried with backoff, then a skipped episode),
and its time is counted apart from the variant's latency. Real HTTP: an OpenAI-compatible server on
loopback that sends its headers at once and trickles the body, reached through litellm's openai route."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from evoharness.compiler.route import ModelParams, RouteSettings
from evoharness.compiler.runtime.llm import ensure_providers
from evoharness.compiler.runtime.models import InfraError, ModelClient, classify

KEY_ENV = "EVOHARNESS_TEST_DEADLINE_KEY"
TIMEOUT_S = 1.5
BYTE_EVERY_S = 0.5
# what a loaded 2-core machine may add to the deadline (connecting, scheduling the client's thread):
# far short of the 2 minutes a per-read timeout would let the trickling body take
SLACK_S = 15.0
BODY = json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                   "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                   "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]}).encode()


class Server:
    def __init__(self) -> None:
        self.attempts = 0
        self.trickle = True
        self.url = ""


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["content-length"]))
            state.attempts += 1
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(BODY)))
            self.end_headers()
            if not state.trickle:
                self.wfile.write(BODY)
                return
            try:
                for byte in BODY:  # each read gets a byte well inside any per-read timeout
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(BYTE_EVERY_S)
            except OSError:  # the client gave up and closed the connection
                pass

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.block_on_close = False  # a handler still trickling to a closed socket must not hold the test up
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield state
    srv.shutdown()
    srv.server_close()


def client(url: str) -> ModelClient:
    return ModelClient(ModelParams(route="openai/whatever"),
                       RouteSettings(api_base=url, api_key_env=KEY_ENV, timeout_s=TIMEOUT_S, retries=1, backoff_s=0,
                                     input_cost_per_token=1e-6, output_cost_per_token=1e-6))


def call(c: ModelClient) -> Any:
    return asyncio.run(c.complete([{"role": "user", "content": "hi"}], tools=[], user="u"))


def test_a_trickling_reply_ends_at_the_deadline_and_is_an_outage(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "unused-by-the-fake-server")
    ensure_providers()  # litellm's import is not part of the call being timed
    start = time.perf_counter()
    with pytest.raises(InfraError) as err:
        call(client(server.url))
    elapsed = time.perf_counter() - start
    # the whole body would take len(BODY) * 0.5 s (about two minutes) per attempt
    assert elapsed < 2 * TIMEOUT_S + SLACK_S, elapsed
    assert server.attempts == 2 and err.value.attempts == 2  # retried once, then given up
    assert "timeout_s=1.5" in str(err.value)
    # both timed-out attempts are the outage's time, never the variant's latency
    assert 2 * TIMEOUT_S - 0.05 <= err.value.infra_s < 2 * TIMEOUT_S + SLACK_S


def test_a_prompt_reply_is_returned(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "unused-by-the-fake-server")
    server.trickle = False
    reply = call(client(server.url))
    assert reply.content == "hi" and reply.attempts == 1 and reply.infra_s == 0.0
    assert server.attempts == 1


def test_a_deadline_is_an_infrastructure_failure() -> None:
    assert classify(TimeoutError("no complete reply within model.timeout_s=1.5 s")) == "infra"
