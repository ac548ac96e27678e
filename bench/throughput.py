"""Throughput of the evaluation path, as ratios measured within one run.

(a) episodes/s of evaluate_variant on BFCL dev (40 tasks, samples=1, seed 0, concurrency 16),
    bfcl_agent on sim/small: the in-process litellm provider vs the HTTP simulator reached as
    ``openai/sim/small`` (server on a thread of this process, and as a separate process).
    Simulated latency off (time_scale 0): this is the CPU cost of the loop, litellm and transport.
    The pass rates must be identical; the table names any other metric that differs (wall time aside).
(b) a cold run that fills a ResponseCache (temp dir) vs a replay from it, at the default
    time_scale 0.1 (the simulated model latency a replay skips) and at time_scale 0 (CPU only).
    Metrics, cost included, must be equal (replayed calls keep their recorded latency).
(c) compile_agent calls per second for the bfcl_agent, json and bash formats.

Each timing is the best of R interleaved repeats (R=5; --quick: 1 repeat on 20 dev tasks) against
noise on a shared machine; compile rates use the fastest of interleaved chunks of 10 compiles.

    python bench/throughput.py [--quick]
"""
from __future__ import annotations

import argparse
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from _common import TOOL, base_agent, model_config, same_metrics, table, timer

KEY_ENV = "EVOHARNESS_BENCH_SIM_KEY"  # the HTTP simulator accepts any key; litellm wants one


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m evoharness.compiler.sim.server`` in a child process (its own interpreter and GIL)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen([sys.executable, "-m", "evoharness.compiler.sim.server", "--port", str(self.port),
                                      "--time-scale", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.api_base}/models", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError("the sim server process did not come up within 30 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def best_of(repeats: int, runs: Mapping[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Interleave the runs ``repeats`` times; keep each one's fastest time and its last result."""
    out: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            with timer() as t:
                result = fn()
            out[name] = (min(t[0], out.get(name, (float("inf"), None))[0]), result)
    return out


def _differs(m: Mapping[str, float], base: Mapping[str, float]) -> str:
    if same_metrics(m, base):
        return "identical"
    keys = sorted(k for k in set(m) | set(base) if k not in ("latency_p50", "latency_p95") and m.get(k) != base.get(k))
    return "differ: " + ", ".join(keys)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, 20 dev tasks, shorter compile loop")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 5
    wall = time.perf_counter()

    from evoharness.compiler.runtime.cache import ResponseCache
    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.sim.server import BackgroundServer
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant

    ensure_providers()  # litellm import (~3 s) outside every timing
    os.environ[KEY_ENV] = "sk-local"
    agent = base_agent()
    small = model_config("sim_small")
    workload = BfclWorkload()
    tasks = list(workload.tasks("dev"))[: 20 if args.quick else 40]
    n = len(tasks)

    def evaluate(variant: Any, cache: ResponseCache | None = None) -> dict[str, float]:
        return dict(evaluate_variant(variant, workload, "dev", samples=1, seed=0, tasks=tasks, concurrency=16, cache=cache).metrics)

    # (a) in-process vs HTTP ------------------------------------------------------------------
    configure_sim(None, time_scale=0.0)
    local = compile_agent(agent, tool=TOOL, model=small)
    evaluate(local)  # warm-up: BFCL data, tokenizer, provider
    with BackgroundServer() as thread_srv, ServerProcess() as proc_srv:
        def http(api_base: str) -> Any:
            return compile_agent(agent, tool=TOOL, model={**small, "route": "openai/sim/small", "api_base": api_base,
                                                          "api_key_env": KEY_ENV})

        thread_v, proc_v = http(thread_srv.api_base), http(proc_srv.api_base)
        evaluate(thread_v), evaluate(proc_v)  # warm-up: HTTP client, the child's BFCL data
        a = best_of(repeats, {"in-process sim/small": lambda: evaluate(local),
                              "HTTP, server thread": lambda: evaluate(thread_v),
                              "HTTP, server process": lambda: evaluate(proc_v)})
    base_s, base_m = a["in-process sim/small"]
    rows_a = []
    for name, (s, m) in a.items():
        rows_a.append([name, f"{s:.2f}", f"{n / s:.1f}", f"{base_s / s:.2f}", m["pass_rate"], f"{m['cost_per_task']:.6f}",
                       _differs(m, base_m)])
    print(f"(a) evaluate_variant, bfcl_agent on sim/small, {n} dev tasks, concurrency 16, time_scale 0, best of {repeats}")
    print(table(["route", "wall s", "episodes/s", "x in-process", "pass_rate", "cost/task $",
                 "metrics vs in-process (wall time aside)"], rows_a))
    identical = all(m["pass_rate"] == base_m["pass_rate"] for _, m in a.values())
    print(f"pass rates identical across routes: {identical}\n")

    # (b) cold vs replay from the response cache ------------------------------------------------
    rows_b = []
    ratios_b: dict[float, float] = {}
    for scale in (0.1, 0.0):
        configure_sim(None, time_scale=scale)
        cold_s = float("inf")
        with tempfile.TemporaryDirectory(prefix="bench-cache-") as root:
            for r in range(repeats):  # each cold run fills a fresh cache
                cache = ResponseCache(os.path.join(root, str(r)))
                with timer() as t:
                    cold = evaluate(local, cache)
                cold_s = min(cold_s, t[0])
            replay = best_of(repeats, {"replay": functools.partial(evaluate, local, cache)})["replay"]
        ratios_b[scale] = cold_s / replay[0]
        rows_b.append([scale, f"{cold_s:.2f}", f"{replay[0]:.2f}", f"{ratios_b[scale]:.1f}", f"{n / replay[0]:.1f}",
                       "yes" if same_metrics(cold, replay[1], ignore=()) else "NO"])
    print(f"(b) cold run (filling a ResponseCache) vs replay from it, {n} dev tasks, sim/small")
    print(table(["time_scale", "cold s", "replay s", "speed-up", "replay episodes/s", "metrics equal (cost, latency too)"], rows_b))
    print()

    # (c) compile_agent per second ----------------------------------------------------------------
    configure_sim(None, time_scale=0.0)
    chunk, rounds = 10, (3 if args.quick else 12)  # interleaved chunks; the fastest chunk per format counts
    cfgs = {fmt: {**agent, "tool_format": fmt} for fmt in ("json", "bash")}
    best: dict[str, float] = {}
    for cfg in cfgs.values():
        compile_agent(cfg, tool=TOOL, model=small)  # warm-up: the catalog
    for _ in range(rounds):
        for fmt, cfg in cfgs.items():
            with timer() as t:
                for _ in range(chunk):
                    compile_agent(cfg, tool=TOOL, model=small)
            best[fmt] = min(best.get(fmt, float("inf")), t[0] / chunk)
    rates = {fmt: 1 / sec for fmt, sec in best.items()}
    rows_c = [[fmt, rounds * chunk, f"{1000 * best[fmt]:.2f}", f"{rates[fmt]:.0f}"] for fmt in cfgs]
    print("(c) compile_agent, bfcl_agent (all BFCL multi-turn tools)")
    print(table(["format", "compiles", "ms/compile (best chunk of 10)", "compiles/s"], rows_c))
    print(f"bash/json compile-rate ratio: {rates['bash'] / rates['json']:.2f}\n")

    thread_s, proc_s = a["HTTP, server thread"][0], a["HTTP, server process"][0]
    print(f"Headline: the HTTP sim runs at {base_s / thread_s:.2f}x (server thread) / {base_s / proc_s:.2f}x (server process) "
          f"the in-process episodes/s with identical pass rates: {identical}; a cache replay is {ratios_b[0.1]:.1f}x faster "
          f"than a cold run at time_scale 0.1 ({ratios_b[0.0]:.1f}x at time_scale 0); compile_agent: "
          f"{rates['json']:.0f}/s json, {rates['bash']:.0f}/s bash.")
    print(f"Total wall time {time.perf_counter() - wall:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
