"""An OpenAI-compatible chat server on loopback that knows only what a provider knows.

No side channel: it never reads the request's ``user`` field, and nothing tells it the task. It
answers the order desk (examples/refunds) from the conversation alone, as a small agent would: find
the customer's orders, then refund, cancel or look one up, then say what happened. At temperature
above 0 it errs with a probability that grows with the temperature (a wrong order, an early
answer), drawn from the request's ``seed`` and the conversation, so a seed gives the same answer
twice and two seeds may not. It checks the bearer key (401 without it), can be told to fail the
next calls (500 bursts, 429 with ``Retry-After``, 400 with a message), reports usage and an
``openai-processing-ms`` header, and records every request it was sent. The price is the test's:
the model config's ``input_cost_per_token``/``output_cost_per_token``.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROCESSING_MS = 40.0
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ORDER = re.compile(r"\bA-\d+\b")
ITEMS = ("lamp", "mug", "chair", "desk", "book", "kettle", "shirt", "phone")
REASONS = (("late", "late"), ("damaged", "damaged"), ("broken", "damaged"), ("wrong", "wrong_item"))


@dataclass
class Failure:
    status: int
    message: str
    retry_after: float | None = None


@dataclass
class StubProvider:
    key: str
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)  # the next calls' failures, in order
    always: Failure | None = None  # every call fails so
    refuse_seed: bool = False  # a server that rejects OpenAI's seed parameter (400), as some do
    caches: bool = False  # a prompt cache, as OpenAI's: a request whose tools it was sent before reads their tokens from it
    cached: list[int] = field(default_factory=list)  # per answered request, the prompt tokens it reported cached
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, status: int, *, times: int = 1, message: str = "stub failure", retry_after: float | None = None) -> None:
        with self._lock:
            self.failures += [Failure(status, message, retry_after)] * times

    def calls(self) -> int:
        return len(self.requests)

    def answered(self) -> list[dict[str, Any]]:
        """The requests answered 200: what the provider billed."""
        return [r for r, s in zip(self.requests, self.statuses) if s == 200]

    def starts(self) -> Counter[tuple[str, Any]]:
        """Per (first user message, seed): how many answered requests opened an episode."""
        return Counter((_texts(r)[0], r.get("seed")) for r in self.answered() if len(r.get("messages", [])) == 2)

    def handle(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
            if auth != f"Bearer {self.key}":
                return self._record(401, _error(401, "Incorrect API key provided", "invalid_api_key"), {})
            if self.refuse_seed and "seed" in body:
                return self._record(400, _error(400, "Unrecognized request argument supplied: seed", "invalid_request"), {})
            failure = self.failures.pop(0) if self.failures else self.always
            if failure is not None:
                extra = {"retry-after": f"{failure.retry_after:g}"} if failure.retry_after is not None else {}
                return self._record(failure.status, _error(failure.status, failure.message, "stub_error"), extra)
            message = respond(body)
            tools = json.dumps(body.get("tools") or [])
            seen = self.caches and any(json.dumps(r.get("tools") or []) == tools for r in self.answered())
            self.cached.append(tokens(tools) if seen else 0)
            return self._record(200, completion(body, message, cached=self.cached[-1]), {"openai-processing-ms": f"{PROCESSING_MS:g}"})

    def _record(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.statuses.append(status)
        return status, body, headers


def _error(status: int, message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error", "code": code}}


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def completion(body: dict[str, Any], message: dict[str, Any], *, cached: int = 0) -> dict[str, Any]:
    prompt = tokens(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools") or []))
    done = tokens(json.dumps(message))
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 1, "model": str(body.get("model")),
            "choices": [{"index": 0, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop", "message": message}],
            "usage": usage}


def message_tokens(bodies: list[dict[str, Any]], role: str = "tool") -> float:
    """The prompt tokens the server billed for these requests' messages of ``role``, by their share of its characters."""
    total = 0.0
    for b in bodies:
        sent = len(json.dumps(b["messages"])) + len(json.dumps(b.get("tools") or []))
        part = sum(len(json.dumps(m)) for m in b["messages"] if m.get("role") == role)
        total += completion(b, respond(b))["usage"]["prompt_tokens"] * part / sent
    return total


def _texts(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user"]


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The next assistant message, from the conversation, the tools offered, the temperature and the seed."""
    messages = body.get("messages", [])
    temperature = float(body.get("temperature") if body.get("temperature") is not None else 1.0)
    seen = json.dumps(messages, sort_keys=True)
    rng = random.Random(hashlib.sha256(f"{body.get('seed')}|{seen}".encode()).digest())
    slip = temperature > 0 and rng.random() < min(0.9, 0.3 * temperature)
    offered = {t["function"]["name"] for t in body.get("tools") or [] if isinstance(t, dict) and "function" in t}
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    request = str(messages[last_user].get("content") or "")
    everything = " ".join(_texts(body))
    called = [c["function"]["name"] for m in messages[last_user:] for c in m.get("tool_calls") or []]
    results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    orders = _orders(results)
    email = EMAIL.search(everything)
    lowered = request.lower()
    if email and "find_order" in offered and not any("order_id" in r for r in results) and not called:
        return _call("find_order", {"customer": email.group(0)})
    target = _pick(request, orders, rng if slip else None)
    if "refund" in lowered and "refund" in offered and "refund" not in called and target and not (slip and called):
        reason = next((r for word, r in REASONS if word in lowered), "other")
        return _call("refund", {"order_id": target["order_id"], "amount": float(target.get("total", 0)), "reason": reason})
    if "cancel" in lowered and "cancel_order" in offered and "cancel_order" not in called and target:
        return _call("cancel_order", {"order_id": target["order_id"]})
    if "status" in lowered and "order_status" in offered and "order_status" not in called and target:
        return _call("order_status", {"order_id": target["order_id"]})
    tail = results[-1] if results and called else ""
    return {"role": "assistant", "content": f"Done. {tail}".strip()}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    digest = hashlib.sha256(f"{name}{sorted(arguments.items())}".encode()).hexdigest()[:12]
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{digest}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _orders(results: list[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for text in results:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, list):
            found += [o for o in value if isinstance(o, dict) and "order_id" in o]
    return found


def _pick(request: str, orders: list[dict[str, Any]], rng: random.Random | None) -> dict[str, Any] | None:
    """The order the request means: named by id, else by item; with ``rng`` (a slip), any of them."""
    named = ORDER.search(request)
    if named:
        chosen: dict[str, Any] | None = next((o for o in orders if o["order_id"] == named.group(0)), {"order_id": named.group(0)})
    else:
        chosen = next((o for o in orders if str(o.get("item", "")) in request.lower() and o.get("item") in ITEMS), None)
        chosen = chosen or (orders[0] if orders else None)
    if rng is not None and orders:
        chosen = rng.choice(orders)
    return chosen


def serve(provider: StubProvider) -> ThreadingHTTPServer:
    """Start the server on a free loopback port (``provider.url`` is its /v1 base); shut it down when done."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            status, answer, extra = provider.handle(dict(self.headers.items()), body)
            if status == 200:  # the time it reports, spent: a client rightly ignores a header longer than its wait
                time.sleep(PROCESSING_MS / 1000)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return server
