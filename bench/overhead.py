"""What evoharness costs per model call, next to a hand-written agent loop doing the same work.

Both sides run the same BFCL dev tasks (multi_turn_base, all 38 by default) through litellm to the
in-process simulator (sim/small, time_scale 0: no simulated sleep), one episode at a time.

- The project side is ``evaluate_variant_async`` (no response cache, concurrency 1): the harness
  loop, argument checks, tool execution in the BFCL environment, trajectories, scoring and metrics.
- The hand-written side is a plain ``litellm.acompletion`` agent loop, written here: for each task it
  builds the messages the project's loop builds (the variant's compiled system prompt, the task's
  user turns, assistant messages with their tool calls, tool results), calls litellm with the same
  route, tools and parameters (temperature, the episode's seed, the episode id as ``user``, timeout,
  no retries), and dispatches the tools by name into the workload's own BFCL environment, up to
  ``agent.max_turns`` calls per user turn, as the project's loop does. It scores nothing and keeps
  no records: its environment's turns end without the per-turn snapshot only BFCL's scorer reads
  (``--snapshots`` keeps them, to see what they cost). It checks no argument against the tool's
  schema, so a call the project refuses for a wrong type reaches the backend there, and its error
  text differs: the next request of that episode is not identical, the number of calls still is.

Before timing, one untimed pass of each side records every request it sends: the two must make the
same number of model calls (else the figure is invalid, and the output says so), and the number of
identical requests (messages, tools, parameters) is reported. Every timed pass is counted again.

R repeats; each runs P passes of each side over the tasks, interleaved (project, hand-written, then
hand-written, project, ...), and sums each side's CPU time (``time.process_time``: every thread of
the process, litellm's logging thread included) and wall time. A repeat is long (about 2 s of CPU
per side by default) because a short one's CPU time moves by 5-15 % on a shared machine. The
figure is the median of the R ratios project / hand-written, with their range. Target (CPU):
median <= 1.10 and the range's upper end < 1.10, so one lucky run cannot meet it.

``--profile N`` times nothing: it runs cProfile (main thread CPU) over one pass of each side and
prints the project side's top N by cumulative and by own time, then the functions whose own time
the project side pays beyond the hand-written loop's.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import TOOL, base_agent, figure, model_config  # noqa: E402

TARGET = 1.10
RULE = "median <= 1.10 and range upper end < 1.10"


def _load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=38, help="the first N BFCL dev tasks (multi_turn_base has 38)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--passes", type=int, default=3, help="passes of each side over the tasks per repeat, interleaved")
    parser.add_argument("--snapshots", action="store_true",
                        help="the hand-written side keeps the environment's per-turn snapshots too (only a scorer reads them)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="instead of timing: cProfile one pass of each side, print the project's top N and its costs beyond the "
                             "hand-written loop's")
    args = parser.parse_args(argv)

    from evoharness.compiler.runtime.llm import drain_litellm_logging, ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.env import BfclEnvironment
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    lm = ensure_providers()
    configure_sim(None, time_scale=0.0)
    variant = compile_agent(base_agent(), tool=TOOL, model=model_config("sim_small"))
    workload = BfclWorkload()
    tasks = list(workload.tasks("dev"))[: args.tasks]
    model, route = variant.model, variant.route
    compiled = {t.name for t in variant.tools}
    before_final = [message for _, message in variant.step_messages("before_final")]

    class TurnsOnly(BfclEnvironment):
        """The workload's BFCL environment, whose turns end without the snapshot BFCL's scorer reads:
        the hand-written loop scores nothing."""

        def end_turn(self, turn: int) -> None:
            self._turn += 1

    environment = workload.make_environment if args.snapshots else TurnsOnly

    async def project() -> int:
        _, trajectories = await evaluate_variant_async(variant, workload, "dev", samples=1, seed=0, tasks=tasks, concurrency=1,
                                                       keep_trajectories=True)
        return sum(len(t.model_calls) for t in trajectories)

    async def handwritten() -> int:
        calls = 0
        tool_lists: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for task in tasks:
            env = environment(task, seed=0)
            offered = [n for n in task.tool_names if n in compiled]
            messages: list[dict[str, Any]] = [{"role": "system", "content": variant.system_prompt_for(offered)}]
            seed = int.from_bytes(hashlib.sha256(f"0\x1f{task.task_id}\x1f0".encode()).digest()[:4], "big") >> 1
            for turn, user_messages in enumerate(task.turns):
                added = [n for n in task.added_tools.get(turn, ()) if n in compiled and n not in offered]
                if added:
                    offered += added
                    messages[0] = {"role": "system", "content": variant.system_prompt_for(offered)}
                key = tuple(offered)
                if key not in tool_lists:
                    tool_lists[key] = [t.native for t in variant.tools if t.name in offered]  # in the variant's order
                tools = tool_lists[key]
                messages.extend(dict(m) for m in user_messages)
                pending = list(before_final)
                acted = False
                for _ in range(variant.max_turns):
                    response = await lm.acompletion(
                        model=model.route, messages=messages, tools=tools, temperature=model.temperature, seed=seed,
                        user=f"task_id={task.task_id}", timeout=route.timeout_s, num_retries=0, max_retries=0)
                    calls += 1
                    message = response.choices[0].message
                    tool_calls = message.tool_calls or []
                    assistant: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
                    if tool_calls:
                        assistant["tool_calls"] = [{"id": c.id, "type": "function",
                                                    "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                                   for c in tool_calls]
                    messages.append(assistant)
                    if not tool_calls:
                        if pending and acted:
                            messages.append({"role": "user", "content": pending.pop(0)})
                            continue
                        break
                    for c in tool_calls:
                        name = c.function.name
                        try:
                            arguments = json.loads(c.function.arguments or "{}")
                            acted = True
                            if name in offered:
                                content = env.call(name, arguments)
                            else:
                                content = f"Error: unknown tool {name!r}; available: {', '.join(offered)}"
                        except Exception as exc:
                            content = f"Error: {type(exc).__name__}: {exc}"
                        messages.append({"role": "tool", "tool_call_id": c.id, "content": content})
                env.end_turn(turn)
        await drain_litellm_logging()  # litellm's own logging work, finished in this loop as the project's side does
        return calls

    sides: dict[str, Callable[[], Any]] = {"project": project, "handwritten": handwritten}

    # one untimed pass of each side with every request recorded: the same calls, and how many are identical
    real = lm.acompletion
    sent: dict[str, list[dict[str, Any]]] = {"project": [], "handwritten": []}
    counted: dict[str, int] = {}
    for name, fn in sides.items():
        async def recording(_box: list[dict[str, Any]] = sent[name], **kwargs: Any) -> Any:
            _box.append(copy.deepcopy({k: v for k, v in kwargs.items() if k != "api_key"}))
            return await real(**kwargs)

        lm.acompletion = recording
        try:
            counted[name] = asyncio.run(fn())
        finally:
            lm.acompletion = real
    calls_p, calls_h = len(sent["project"]), len(sent["handwritten"])
    identical = sum(a == b for a, b in zip(sent["project"], sent["handwritten"]))
    valid = calls_p == calls_h and counted["project"] == calls_p and counted["handwritten"] == calls_h
    first_diff = next((i for i, (a, b) in enumerate(zip(sent["project"], sent["handwritten"])) if a != b), None)

    if args.profile:
        return _profile(project, handwritten, args.profile, calls_p)

    load_before = _load()
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    wall: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(2):  # warm both paths: BFCL data, the tokenizer, litellm's first-call work
        for fn in sides.values():
            asyncio.run(fn())
    unequal = 0  # timed passes whose side made another number of calls than the checked pass
    for r in range(args.repeats):
        spent = {name: [0.0, 0.0] for name in sides}
        for p in range(args.passes):
            for name in (list(sides) if (r + p) % 2 == 0 else list(reversed(sides))):
                gc.collect()
                c0, w0 = time.process_time(), time.perf_counter()
                made = asyncio.run(sides[name]())
                w1, c1 = time.perf_counter(), time.process_time()
                spent[name][0] += c1 - c0
                spent[name][1] += w1 - w0
                unequal += made != calls_p
        for name, (c, w) in spent.items():
            cpu[name].append(c)
            wall[name].append(w)
    load_after = _load()
    if unequal:
        valid = False

    def ratios(times: dict[str, list[float]]) -> list[float]:
        return [p / h for p, h in zip(times["project"], times["handwritten"])]

    cpu_r, wall_r = ratios(cpu), ratios(wall)
    cpu_med, wall_med = statistics.median(cpu_r), statistics.median(wall_r)
    met = valid and cpu_med <= TARGET and max(cpu_r) < TARGET
    common: dict[str, Any] = {"repeats": args.repeats, "passes_per_repeat": args.passes, "episodes": len(tasks),
                              "model_calls_project": calls_p, "model_calls_handwritten": calls_h,
                              "handwritten_keeps_snapshots": args.snapshots}
    if not valid:
        common["invalid"] = (f"the sides made different numbers of model calls ({calls_p} vs {calls_h}; {unequal} timed passes "
                             "differed): the ratio compares unequal work")
    figure("overhead_cpu_ratio_project_over_handwritten", round(cpu_med, 3), TARGET, met,
           range=[round(min(cpu_r), 3), round(max(cpu_r), 3)], rule=RULE, **common)
    figure("overhead_wall_ratio_project_over_handwritten", round(wall_med, 3), None, None,
           range=[round(min(wall_r), 3), round(max(wall_r), 3)], **common)
    per_call = {(kind, name): statistics.median(t[name]) / args.passes / max(calls_p, 1) * 1000
                for kind, t in (("cpu", cpu), ("wall", wall)) for name in sides}
    for (kind, name), ms in per_call.items():
        figure(f"ms_per_model_call_{name}_{kind}", round(ms, 3), None, None)
    figure("model_calls_equal", valid, True, valid, project=calls_p, handwritten=calls_h, timed_passes_unequal=unequal,
           identical_requests=identical, first_differing_request=first_diff)
    print(f"load: before {load_before}; after {load_after}")
    verdict = "met" if met else ("INVALID: unequal call counts" if not valid else "not met")
    print(f"summary: CPU project/hand-written {cpu_med:.3f} [{min(cpu_r):.3f}-{max(cpu_r):.3f}] (target {RULE}: {verdict}); "
          f"wall {wall_med:.3f} [{min(wall_r):.3f}-{max(wall_r):.3f}]; CPU ms per call "
          f"{per_call['cpu', 'project']:.2f} vs {per_call['cpu', 'handwritten']:.2f}; {calls_p} vs {calls_h} model calls "
          f"({identical} identical requests) over {len(tasks)} episodes; {args.repeats} repeats of {args.passes} interleaved passes")
    return 0


def _profile(project: Callable[[], Any], handwritten: Callable[[], Any], top: int, calls: int) -> int:
    """cProfile of one pass of each side, timed in the main thread's CPU (litellm's logging threads
    are out of it): the project side's top costs, then the functions whose own time the project side
    pays beyond the hand-written loop's."""
    import cProfile
    import io
    import pstats

    stats: dict[str, pstats.Stats] = {}
    for name, fn in (("project", project), ("handwritten", handwritten)):
        asyncio.run(fn())  # warm
        gc.collect()
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        asyncio.run(fn())
        profiler.disable()
        stats[name] = pstats.Stats(profiler)
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats["project"].stream = out  # type: ignore[attr-defined]
        stats["project"].sort_stats(order).print_stats(top)
        print(f"--- project side, {calls} model calls, by {order} (main thread CPU) ---")
        print(out.getvalue())
    own = {name: {f: row[2] for f, row in st.stats.items()} for name, st in stats.items()}  # type: ignore[attr-defined]
    cum = {f: row[3] for f, row in stats["project"].stats.items()}  # type: ignore[attr-defined]
    extra = sorted(((t - own["handwritten"].get(f, 0.0), f) for f, t in own["project"].items()), reverse=True)[:top]
    total = {name: sum(v.values()) for name, v in own.items()}
    print(f"--- own time the project side pays beyond the hand-written loop (totals {total['project'] * 1000:.0f} vs "
          f"{total['handwritten'] * 1000:.0f} ms) ---")
    print(f"{'extra ms':>9} {'per call us':>11} {'cum ms':>8}  function")
    for delta, (file, line, func) in extra:
        print(f"{delta * 1000:9.1f} {delta / calls * 1e6:11.1f} {cum[(file, line, func)] * 1000:8.1f}  {file}:{line}({func})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
