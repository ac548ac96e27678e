"""Memory over a long evaluation: does RSS stay flat across thousands of BFCL episodes?

Runs 2,000 episodes (400 with --quick) of the bfcl_agent on sim/small in batches of 200 (100),
cycling through all 200 BFCL multi-turn base scenarios (train, dev and holdout), a new seed per
batch so no episode repeats, concurrency 16, time_scale 0. After each batch (and a gc.collect())
it prints the process's VmRSS, the number of objects the garbage collector tracks, and two
module-level stores of the simulator whose contents (strings, ints) the gc does not track, so
their growth shows in RSS only: the bounded token-count cache (compiler/sim/tokens.py, 8192
texts) and the per-process attempt counter (compiler/sim/faults.py, one request digest per
distinct request when the request names no attempt; unbounded).

BFCL environments are made per episode (evoharness.compiler.workloads.bfcl.env), with no module-level
instance cache like bfcl-eval's own checker keeps, so RSS should plateau once the first batches
have warmed every lazily loaded dataset and bounded cache. The headline is the growth between
batch 2 and the last batch.

    python bench/memory.py [--quick]
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from collections.abc import Sequence

from _common import TOOL, base_agent, model_config, rss_mib, table


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def attempt_counter() -> tuple[int, float]:
    """Entries and approximate MiB of the simulator's per-process attempt counter
    (compiler/sim/faults.py ``_ATTEMPTS``: one request digest per distinct request, used when the
    request names no ``attempt``); (0, 0.0) if the module no longer has it."""
    from evoharness.compiler.sim import faults

    counter = getattr(faults, "_ATTEMPTS", None)
    if not isinstance(counter, dict):
        return 0, 0.0
    size = sys.getsizeof(counter) + sum(sys.getsizeof(k) for k in counter)
    return len(counter), size / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 episodes in batches of 100")
    args = parser.parse_args(argv)
    total, batch = (400, 100) if args.quick else (2000, 200)
    wall = time.perf_counter()

    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.runtime.workload import SPLITS
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.sim.tokens import count_text_tokens
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant

    ensure_providers()  # litellm (~200 MiB) is imported before the baseline RSS
    configure_sim(None, time_scale=0.0)
    workload = BfclWorkload()
    scenarios = [t for split in SPLITS for t in workload.tasks(split)]
    variant = compile_agent(base_agent(), tool=TOOL, model=model_config("sim_small"))
    gc.collect()
    start_rss = rss_mib()
    rows = []
    rss: list[float] = []
    done = 0
    for b in range(total // batch):
        tasks = [scenarios[(done + i) % len(scenarios)] for i in range(batch)]
        t0 = time.perf_counter()
        report = evaluate_variant(variant, workload, "train", samples=1, seed=b, tasks=tasks, concurrency=16)
        seconds = time.perf_counter() - t0
        pass_rate = report.metrics["pass_rate"]
        del report
        gc.collect()
        done += batch
        rss.append(rss_mib())
        attempts, attempts_mib = attempt_counter()
        rows.append([b + 1, done, f"{rss[-1]:.1f}", f"{rss[-1] - (rss[-2] if len(rss) > 1 else start_rss):+.1f}",
                     len(gc.get_objects()), count_text_tokens.cache_info().currsize,
                     f"{attempts} ({attempts_mib:.1f} MiB)", f"{batch / seconds:.1f}", pass_rate])
    print(f"{total} BFCL episodes, bfcl_agent on sim/small, {len(scenarios)} scenarios cycled, concurrency 16, time_scale 0 "
          f"(RSS before the first batch, after importing litellm and compiling: {start_rss:.1f} MiB)")
    print(table(["batch", "episodes", "RSS MiB", "delta MiB", "gc objects", "token-count LRU (max 8192)", "sim attempt counter",
                 "episodes/s", "pass_rate"], rows))
    growth = rss[-1] - rss[1]
    later = done - 2 * batch
    print(f"\nHeadline: RSS grew {growth:+.1f} MiB ({100 * growth / rss[1]:+.1f}%) from batch 2 to batch {len(rss)} "
          f"({later} more episodes, {1000 * growth / later:+.2f} MiB per 1000 episodes); "
          f"first-batch warm-up: {rss[0] - start_rss:+.1f} MiB; peak RSS (getrusage) {peak_mib():.1f} MiB.")
    print(f"Total wall time {time.perf_counter() - wall:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
