"""How well an evaluation keeps a slow model busy: 64 BFCL episodes on sim/small, with the simulator's
time scale set so that a call takes about 0.5 s, at concurrency c = 1, 8, 32 and 64 (the route's
limit raised to c, so it does not cap the run).

Efficiency at c = ideal / actual wall time. The ideal replays the episodes' recorded chains of
model latency (provider-reported) through the same scheduler with no overhead: episodes enter in
submission order as one of the c slots frees, as the evaluation's gate admits them; 1.0 means the
event loop never kept a call waiting. The packing bound max(total latency / c, the longest chain),
which no scheduler that cannot foresee episode lengths reaches, is printed beside it. Latencies are the
provider-reported ones the trajectories record. c = 1 runs the first 8 episodes only (64 would take
minutes and tell nothing new). Then the same at about 0.1 s per call, where the loop's own CPU per
call starts to matter: the figure there is where efficiency falls below 0.85, and the CPU per call
that explains it (c x CPU per call > latency saturates one core).

Targets: efficiency >= 0.85 at c = 32 and at c = 64, at 0.5 s.
"""
from __future__ import annotations

import argparse
import asyncio
import heapq
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import TOOL, base_agent, figure, model_config  # noqa: E402

TARGET = 0.85


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def greedy_makespan(chains: Sequence[float], c: int) -> float:
    """Wall time of running the chains in order on c slots, each taking the first free slot."""
    slots = [0.0] * min(c, len(chains))
    heapq.heapify(slots)
    end = 0.0
    for chain in chains:
        finish = heapq.heappop(slots) + chain
        end = max(end, finish)
        heapq.heappush(slots, finish)
    return end


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    args = parser.parse_args(argv)

    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    ensure_providers()
    workload = BfclWorkload()
    tasks = list(workload.tasks("train"))[: args.episodes]
    small = model_config("sim_small")

    def run(c: int, n: int) -> dict[str, Any]:
        variant = compile_agent(base_agent(), tool=TOOL, model={**small, "concurrency": c})
        cpu, start = _cpu(), time.perf_counter()
        _, trajectories = asyncio.run(evaluate_variant_async(variant, workload, "train", samples=1, seed=0, tasks=tasks[:n],
                                                             concurrency=c, keep_trajectories=True))
        wall, used = time.perf_counter() - start, _cpu() - cpu
        chains = [sum(m.latency_s for m in t.model_calls) for t in trajectories]
        calls = sum(len(t.model_calls) for t in trajectories)
        ideal = greedy_makespan(chains, c)
        packing = max(sum(chains) / c, max(chains))
        return {"c": c, "episodes": n, "calls": calls, "wall_s": wall, "ideal_s": ideal, "efficiency": ideal / wall,
                "packing_s": packing, "packing_efficiency": packing / wall,
                "mean_call_s": sum(chains) / calls, "cpu_ms_per_call": used / calls * 1000}

    # the scale that makes a call about 0.5 s: measured, as the simulator's latency depends on the reply
    configure_sim(None, time_scale=1.0)
    pilot = run(8, 8)
    unit = pilot["mean_call_s"]
    out: list[dict[str, Any]] = []
    for target_s, levels in ((0.5, (1, 8, 32, 64)), (0.1, (8, 32, 64))):
        configure_sim(None, time_scale=target_s / unit)
        for c in levels:
            row = run(c, 8 if c == 1 else args.episodes)
            row["latency_target_s"] = target_s
            out.append(row)
            print(f"# {target_s} s/call, c={c}: {row['episodes']} episodes, {row['calls']} calls, wall {row['wall_s']:.2f} s, "
                  f"ideal {row['ideal_s']:.2f} s, efficiency {row['efficiency']:.3f} (packing bound {row['packing_s']:.2f} s: "
                  f"{row['packing_efficiency']:.3f}), mean call {row['mean_call_s']:.3f} s, "
                  f"CPU {row['cpu_ms_per_call']:.2f} ms/call", flush=True)
    for row in out:
        gated = row["latency_target_s"] == 0.5 and row["c"] in (32, 64)
        figure(f"efficiency_at_{row['latency_target_s']}s_c{row['c']}", round(row["efficiency"], 3), TARGET if gated else None,
               (row["efficiency"] >= TARGET) if gated else None, packing_bound_efficiency=round(row["packing_efficiency"], 3),
               mean_call_s=round(row["mean_call_s"], 3), episodes=row["episodes"], calls=row["calls"])
    fast = [r for r in out if r["latency_target_s"] == 0.1]
    cpu = statistics.median(r["cpu_ms_per_call"] for r in out)
    saturated = next((r["c"] for r in fast if r["efficiency"] < TARGET), None)
    figure("cpu_ms_per_model_call", round(cpu, 3), None, None)
    figure("saturates_at_0.1s_first_c_below_target", saturated, None, None,
           one_core_bound_c=round(fast[0]["mean_call_s"] / (cpu / 1000), 1))
    slow = {r["c"]: r["efficiency"] for r in out if r["latency_target_s"] == 0.5}
    at_slow = ", ".join(f"c={c} {e:.2f}" for c, e in slow.items())
    at_fast = ", ".join(f"c={r['c']} {r['efficiency']:.2f}" for r in fast)
    print(f"summary: at 0.5 s/call efficiency {at_slow} (target >= {TARGET} at 32 and 64); at 0.1 s/call {at_fast}; "
          f"{cpu:.2f} ms CPU per call, so one core keeps at most ~{fast[0]['mean_call_s'] / (cpu / 1000):.0f} calls of 0.1 s in flight")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
