"""The simulator over HTTP: an OpenAI-compatible endpoint on loopback (stdlib only).

    POST /v1/chat/completions   model "small" | "sim/small" | ..., messages, tools, temperature, seed, user
    GET  /v1/models

Reach it from litellm as ``openai/sim/small`` with ``api_base=http://127.0.0.1:<port>/v1`` and any
api_key. Answers equal the in-process ``sim/small`` route's; faults become HTTP statuses
(timeout 504, server error 500, rate limit 429) and bad requests 400.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evoharness.compiler.errors import OneLineParser
from evoharness.compiler.sim.conversation import SimRequestError
from evoharness.compiler.sim.engine import SimRequest
from evoharness.compiler.sim.faults import SimConfig, configure_sim
from evoharness.compiler.sim.gold import GoldSource, WorkloadGoldSource
from evoharness.compiler.sim.service import PROCESSING_HEADER, SimOutcome, run_request
from evoharness.compiler.sim.tiers import TIERS

FAULT_STATUS = {"timeout": 504, "server_error": 500, "rate_limit": 429}


def completion_body(outcome: SimOutcome) -> dict[str, Any]:
    result, rendered = outcome.result, outcome.rendered
    message: dict[str, Any] = {"role": "assistant", "content": rendered.content}
    if rendered.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in rendered.tool_calls]
    return {
        "id": f"chatcmpl-sim-{result.digest[:16]}", "object": "chat.completion",
        "created": int(time.time()), "model": result.model_name,
        "choices": [{"index": 0, "message": message, "finish_reason": rendered.finish_reason}],
        "usage": {"prompt_tokens": result.prompt_tokens,
                  "completion_tokens": result.completion_tokens,
                  "total_tokens": result.prompt_tokens + result.completion_tokens},
    }


def _error(status: int, message: str, kind: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": kind, "code": status}}


def handle_chat(body: Any, gold: GoldSource) -> tuple[int, dict[str, Any], float]:
    """(status, JSON body, seconds to sleep before answering): pure apart from the gold source."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return (*_error(400, "body must be a JSON object with a messages list", "invalid_request_error"), 0.0)
    if body.get("stream"):
        return (*_error(400, "stream=true is not supported by the simulator; send stream=false",
                        "invalid_request_error"), 0.0)
    request = SimRequest(model=str(body.get("model", "")), messages=body["messages"],
                         tools=body.get("tools") or None, temperature=body.get("temperature"),
                         user=body.get("user"), seed=body.get("seed"))
    try:
        outcome = run_request(request, gold, body.get("sim_faults"))
    except (SimRequestError, ValueError) as exc:
        return (*_error(400, str(exc), "invalid_request_error"), 0.0)
    if outcome.fault in FAULT_STATUS:
        status = FAULT_STATUS[str(outcome.fault)]
        return (*_error(status, f"simulated {outcome.fault} from {outcome.result.model_name}",
                        str(outcome.fault)), outcome.delay_s)
    return 200, completion_body(outcome), outcome.delay_s


def models_body() -> dict[str, Any]:
    return {"object": "list", "data": [{"id": f"sim/{name}", "object": "model", "created": 0,
                                        "owned_by": "evoharness"} for name in TIERS]}


def make_handler(gold: GoldSource) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: dict[str, Any], processing_s: float | None = None) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if processing_s is not None:  # the header OpenAI sends: the simulated latency, as the server's own time
                self.send_header(PROCESSING_HEADER, f"{processing_s * 1000:.3f}")
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, models_body())
            else:
                self._send(*_error(404, f"no route {self.path}; use GET /v1/models", "not_found"))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(*_error(404, f"no route {self.path}; use POST /v1/chat/completions",
                                   "not_found"))
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(*_error(400, "request body is not JSON", "invalid_request_error"))
                return
            status, payload, delay = handle_chat(body, gold)
            time.sleep(delay)
            self._send(status, payload, delay if status == 200 else None)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # one line per request would drown test and search output

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 refuses connections when a harness runs 16 episodes at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that went away mid-reply (killed, timed out) is not the server's error
        super().handle_error(request, client_address)


def make_server(host: str = "127.0.0.1", port: int = 0,
                gold: GoldSource | None = None) -> _Server:
    from evoharness.compiler.sim.provider import register_sim_provider

    # the same registration as the in-process route: litellm's token counting for sim/* depends on it,
    # and the endpoint must bill exactly what the in-process route bills
    register_sim_provider()
    return _Server((host, port), make_handler(gold or WorkloadGoldSource()))


def serve(host: str = "127.0.0.1", port: int = 8765, ready: threading.Event | None = None,
          gold: GoldSource | None = None) -> None:
    """Serve until interrupted; ``ready`` is set once the socket is listening."""
    server = make_server(host, port, gold)
    if ready is not None:
        ready.set()
    try:
        server.serve_forever()
    finally:
        server.server_close()


class BackgroundServer:
    """The endpoint on a background thread (tests): ``with BackgroundServer() as s: s.api_base``."""

    def __init__(self, gold: GoldSource | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = make_server(host, port, gold)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="sim-http", daemon=True)

    @property
    def api_base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> BackgroundServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def main(argv: Sequence[str] | None = None) -> int:
    """``evoharness serve-sim --port N [--time-scale S] [--timeout-rate R] ... [--shared-draws]``"""
    parser = OneLineParser(prog="evoharness serve-sim",
                                     description="Serve the simulated model (sim/small|medium|large) "
                                                 "as an OpenAI-compatible endpoint on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port, default=8765, help="TCP port; 0 picks a free one")
    defaults = SimConfig()
    parser.add_argument("--time-scale", type=float, default=defaults.time_scale)
    for knob in ("timeout_rate", "server_error_rate", "rate_limit_rate", "malformed_rate"):
        parser.add_argument(f"--{knob.replace('_', '-')}", type=float, default=0.0, dest=knob)
    parser.add_argument("--shared-draws", action="store_true",
                        help="variants share random numbers (a benchmark's low-variance true front)")
    parser.add_argument("--surface", choices=("documented", "blind"), default="documented",
                        help="the model card's response surface, or a blind one drawn from --surface-seed")
    parser.add_argument("--surface-seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        configure_sim(None, SimConfig(time_scale=args.time_scale, timeout_rate=args.timeout_rate,
                                      server_error_rate=args.server_error_rate, rate_limit_rate=args.rate_limit_rate,
                                      malformed_rate=args.malformed_rate, shared_draws=args.shared_draws,
                                      surface=args.surface, surface_seed=args.surface_seed))
    except ValueError as exc:
        parser.error(str(exc))
    if not _loopback(args.host):
        parser.error(f"--host {args.host} is not a loopback address; the simulator serves this machine only "
                     "(use 127.0.0.1, ::1 or localhost)")
    try:
        server = make_server(args.host, args.port)
    except OSError as exc:  # busy port, a host that is not ours, a privileged port
        parser.error(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
                     "pick a free port (--port 0 picks one) on a local address")
    host, port = server.server_address[:2]
    print(f"sim endpoint: http://{host!s}:{port}/v1 (models: {', '.join('sim/' + t for t in TIERS)})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


if __name__ == "__main__":
    raise SystemExit(main())
