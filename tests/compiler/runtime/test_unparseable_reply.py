"""A reply the provider sent but litellm cannot read (a tool call with no function, content of the wrong
type) is the model's output: a scored mistake the model is told about, never retried as an outage and
never a skipped episode. A body that is not JSON at all is transport damage: retried, then skipped.
Real HTTP: an OpenAI-compatible server on loopback, reached through litellm's openai route."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from evoharness.compiler.route import RouteSettings
from evoharness.compiler.runtime.models import ModelClient
from tests.compiler.runtime.test_runtime import run, variant

USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
NO_FUNCTION = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
CONTENT_LIST = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
DONE = {"role": "assistant", "content": "Done."}


def completion(message: dict[str, Any]) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "usage": USAGE,
                       "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}).encode()


class Replies:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.requests: list[dict[str, Any]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Replies]]:
    replies = Replies()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            replies.requests.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            body = replies.bodies.pop(0) if replies.bodies else completion(DONE)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", replies
    srv.shutdown()
    srv.server_close()


def client_for(v: Any, api_base: str) -> ModelClient:
    return ModelClient(v.model, RouteSettings(api_base=api_base, retries=2, backoff_s=0.001, input_cost_per_token=1e-6,
                                              output_cost_per_token=2e-6))


@pytest.mark.parametrize("bad", [NO_FUNCTION, CONTENT_LIST], ids=["tool_call_without_function", "content_not_text"])
def test_unreadable_reply_is_a_scored_mistake_not_an_outage(server: tuple[str, Replies], bad: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-fake-server")
    api_base, replies = server
    replies.bodies = [completion(bad)]
    v = variant("json", "openai/m")
    traj, _ = run(v, client=client_for(v, api_base))
    assert traj.status == "completed" and traj.infra_error is None  # scored, not skipped
    first = traj.model_calls[0]
    assert first.parse_error and "could not" not in first.parse_error and "well-formed" in first.parse_error
    assert first.attempts == 1 and first.finish_reason == "unparseable"  # not retried as an outage
    # the model was told, in the next request of the same episode
    told = [m for m in replies.requests[1]["messages"] if m["role"] == "user" and "could not be read" in str(m["content"])]
    assert len(told) == 1


def test_body_that_is_not_json_is_an_outage(server: tuple[str, Replies], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-fake-server")
    api_base, replies = server
    replies.bodies = [b"{not json"] * 3  # every attempt of the first call (retries=2)
    v = variant("json", "openai/m")
    traj, _ = run(v, client=client_for(v, api_base))
    assert traj.status == "infra_error" and traj.lost_attempts == 3  # retried, then skipped: never scored 0
