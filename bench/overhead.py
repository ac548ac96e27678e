"""What evoharness costs per model call, next to the model: the project's evaluation path against a
minimal hand-written ``litellm.acompletion`` loop over the same requests.

Both sides make the same model calls through litellm to the in-process simulator (sim/small,
time_scale 0: no simulated sleep, so what is timed is CPU). The project side is
``evaluate_variant_async`` on BFCL dev tasks, no response cache, concurrency 1: the harness loop,
tool execution in the BFCL environment, scoring and metrics. The minimal side replays the exact
requests the project sent (recorded once, in a separate pass) one after another, and does nothing
with the replies. R interleaved repeats; the figure is the median ratio of the two wall times.

Target: project / minimal <= 1.10.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import TOOL, base_agent, figure, model_config  # noqa: E402

TARGET = 1.10


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    lm = ensure_providers()
    configure_sim(None, time_scale=0.0)
    variant = compile_agent(base_agent(), tool=TOOL, model=model_config("sim_small"))
    workload = BfclWorkload()
    tasks = list(workload.tasks("dev"))[: args.tasks]

    async def project() -> Any:
        report, _ = await evaluate_variant_async(variant, workload, "dev", samples=1, seed=0, tasks=tasks, concurrency=1)
        return report

    # the requests the project sends, recorded once (the recorder's own cost stays out of every timing)
    recorded: list[dict[str, Any]] = []
    real = lm.acompletion

    async def recording(**kwargs: Any) -> Any:
        recorded.append(copy.deepcopy({k: v for k, v in kwargs.items() if k not in ("api_key",)}))
        return await real(**kwargs)

    lm.acompletion = recording
    try:
        asyncio.run(project())
    finally:
        lm.acompletion = real

    async def minimal() -> None:
        for req in recorded:
            await lm.acompletion(**req)

    asyncio.run(project())  # warm both paths: BFCL data, tokenizer, litellm's first-call work
    asyncio.run(minimal())
    times: dict[str, list[float]] = {"project": [], "minimal": []}
    for _ in range(args.repeats):
        for name, fn in (("project", project), ("minimal", minimal)):
            start = time.perf_counter()
            asyncio.run(fn())
            times[name].append(time.perf_counter() - start)
    ratios = [p / m for p, m in zip(times["project"], times["minimal"])]
    calls = len(recorded)
    ratio = statistics.median(ratios)
    per_call = {k: statistics.median(v) / calls * 1000 for k, v in times.items()}
    figure("overhead_ratio_project_over_minimal_litellm", round(ratio, 3), TARGET, ratio <= TARGET,
           range=[round(min(ratios), 3), round(max(ratios), 3)], repeats=args.repeats, model_calls=calls, episodes=len(tasks))
    figure("ms_per_model_call_project", round(per_call["project"], 3), None, None)
    figure("ms_per_model_call_minimal_litellm", round(per_call["minimal"], 3), None, None)
    print(f"summary: project path {per_call['project']:.2f} ms per model call, minimal litellm loop {per_call['minimal']:.2f} ms: "
          f"{ratio:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] over {calls} calls, {args.repeats} interleaved repeats "
          f"(target <= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
