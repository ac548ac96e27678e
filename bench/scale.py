"""Does an evaluation stay flat as it grows? 50, 100, 200 and 400 BFCL episodes (all four multi-turn
categories, train tasks) on sim/small, in process, simulated latency off (time_scale 0: the loop's,
the tools' and the simulator's CPU), concurrency 16; sizes interleaved over R repeats.

Figures: time per episode max/min over the sizes (median per size; target <= 1.3), and resident
memory growth per episode (ru_maxrss after the largest size minus after the smallest, per extra
episode; reported, no target).
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import TOOL, base_agent, figure, model_config  # noqa: E402

TARGET = 1.3
SIZES = (50, 100, 200, 400)


def _rss_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import CATEGORIES, BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    ensure_providers()
    configure_sim(None, time_scale=0.0)
    workload = BfclWorkload(categories=tuple(CATEGORIES))
    tasks = [*workload.tasks("train"), *workload.tasks("dev")][: max(SIZES)]
    if len(tasks) < max(SIZES):
        raise SystemExit(f"only {len(tasks)} tasks; need {max(SIZES)}")
    variant = compile_agent(base_agent(), tool=TOOL, model=model_config("sim_small"))

    def run(n: int) -> float:
        start = time.perf_counter()
        asyncio.run(evaluate_variant_async(variant, workload, "train", samples=1, seed=0, tasks=tasks[:n], concurrency=16))
        return (time.perf_counter() - start) / n

    run(50)  # warm: BFCL data, tokenizer, litellm's first calls
    rss: dict[int, int] = {}
    per: dict[int, list[float]] = {n: [] for n in SIZES}
    for _ in range(args.repeats):
        for n in SIZES:
            per[n].append(run(n))
            rss.setdefault(n, _rss_kib())
    medians = {n: statistics.median(v) for n, v in per.items()}
    ratio = max(medians.values()) / min(medians.values())
    growth = (rss[max(SIZES)] - rss[min(SIZES)]) / (max(SIZES) - min(SIZES))
    for n in SIZES:
        figure(f"ms_per_episode_at_{n}", round(medians[n] * 1000, 2), None, None,
               range_ms=[round(min(per[n]) * 1000, 2), round(max(per[n]) * 1000, 2)])
    figure("time_per_episode_max_over_min", round(ratio, 3), TARGET, ratio <= TARGET, sizes=list(SIZES), repeats=args.repeats)
    figure("rss_growth_kib_per_episode", round(growth, 2), None, None, rss_kib={str(n): rss[n] for n in SIZES})
    print(f"summary: {', '.join(f'{n}: {medians[n] * 1000:.1f} ms' for n in SIZES)} per episode; max/min {ratio:.2f} "
          f"(target <= {TARGET}); RSS +{growth:.1f} KiB per episode (first pass of each size)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
