"""A warm run is nearly free: `evoharness evaluate` through the CLI at its defaults (sim_large,
every dev task; a new process each time, as a user runs it), cold against an empty response cache, then warm against the cache it filled.
Interleaved: each repeat runs a cold evaluate in a fresh folder and then a warm one on the same
cache. The warm run's eval.json must report 0 billed tokens and $0 billed, with the uncached
cost beside it, and the same metrics as the cold run. Python writes its bytecode cache as it does
on a user's machine (PYTHONDONTWRITEBYTECODE is dropped from the runs' environment): a run that
recompiles every module it imports measures the interpreter, not the project.

Targets: cold / warm wall time >= 20x; warm billed tokens = 0.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, figure  # noqa: E402

TARGET = 20.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evaluate(runs: Path, cache: Path, *extra: str) -> tuple[float, float, dict[str, Any]]:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start, cpu = time.perf_counter(), _children_cpu()
    cli = [sys.executable, "-c", "from evoharness.search.cli.main import entry; entry()"]
    proc = subprocess.run([*cli, "evaluate", f"runs_dir={runs}", f"cache_dir={cache}", *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"evaluate failed: {proc.stderr[-2000:]}")
    line = next(x for x in proc.stderr.splitlines() if x.startswith("eval: "))
    return wall, cpu, json.loads(Path(line.removeprefix("eval: ")).read_text(encoding="utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="evaluate overrides (default: none, the README's evaluate)")
    args = parser.parse_args(argv)
    extra = tuple(args.overrides)
    cold, warm, cold_cpu, warm_cpu, billed, same = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="evoharness-bench-cache-") as tmp:
        for r in range(args.repeats):
            runs, cache = Path(tmp) / f"r{r}", Path(tmp) / f"cache{r}"
            c_s, c_cpu, c_eval = evaluate(runs, cache, *extra)
            w_s, w_cpu, w_eval = evaluate(runs, cache, *extra)
            cold.append(c_s)
            warm.append(w_s)
            cold_cpu.append(c_cpu)
            warm_cpu.append(w_cpu)
            billed.append(w_eval["billing"])
            keep = ("pass_rate", "cost_per_task", "latency_p95", "tokens_per_task")
            same.append(all(c_eval["metrics"][k] == w_eval["metrics"][k] for k in keep))
            print(f"# repeat {r}: cold {c_s:.2f} s ({c_cpu:.2f} CPU-s), warm {w_s:.2f} s ({w_cpu:.2f} CPU-s), "
                  f"warm billing {w_eval['billing']}", flush=True)
    ratios = [c / w for c, w in zip(cold, warm)]
    ratio = statistics.median(ratios)
    tokens = max(b["billed_tokens"] for b in billed)
    figure("cold_over_warm_evaluate", round(ratio, 2), TARGET, ratio >= TARGET, range=[round(min(ratios), 2), round(max(ratios), 2)],
           cold_s=round(statistics.median(cold), 2), warm_s=round(statistics.median(warm), 2), repeats=args.repeats,
           overrides=list(extra))
    cpu_ratios = [c / w for c, w in zip(cold_cpu, warm_cpu)]
    figure("cold_over_warm_evaluate_cpu", round(statistics.median(cpu_ratios), 2), TARGET, statistics.median(cpu_ratios) >= TARGET,
           range=[round(min(cpu_ratios), 2), round(max(cpu_ratios), 2)], cold_cpu_s=round(statistics.median(cold_cpu), 2),
           warm_cpu_s=round(statistics.median(warm_cpu), 2))
    figure("warm_billed_tokens", tokens, 0, tokens == 0, warm_billed_cost=max(b["billed_cost"] for b in billed),
           warm_cost_if_uncached=billed[0]["cost_if_uncached"])
    figure("warm_metrics_equal_cold", all(same), True, all(same))
    print(f"summary: cold {statistics.median(cold):.2f} s, warm {statistics.median(warm):.2f} s: {ratio:.1f}x "
          f"[{min(ratios):.1f}-{max(ratios):.1f}] (target >= {TARGET:g}); warm billed {tokens:g} tokens, "
          f"${max(b['billed_cost'] for b in billed):.4f} of ${billed[0]['cost_if_uncached']:.4f} uncached")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
