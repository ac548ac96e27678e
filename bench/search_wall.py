"""The default main job's wall time against what its work needs, and whether it is reproducible.

1. ``evoharness search`` at every default, cold (fresh runs dir and response cache). Its paid work
   is read back from the study: every evaluation's episodes (runs/<study>/evals) and their
   per-call latencies as the provider reported them.
2. ideal = max(CPU floor, latency floor). CPU floor = episodes x the CPU one episode costs (measured
   in process here, simulated latency off) / cores. An evaluation's own latency floor is max(its
   longest episode, its total model latency / its episode concurrency); the default launcher runs
   up to W evaluations at a time (two per core, at most a batch: ``usable_workers``), so the
   latency floor is max(the largest evaluation floor, the sum of evaluation floors / W). The sum
   itself (one evaluation at a time, the basic launcher's floor) is reported beside it.
3. Where the time went, from the evaluations' worker records: the CPU the jobs' processes spent per
   episode (against the in-process figure of 2), how many cores they kept busy on average, and the
   wall time in which no job ran at all (start-up, the orchestrator between batches and rounds).
4. The same command again with the same seed on a new study folder and the warm cache: it must pick
   the identical champion (variant hash), front and claim.
5. What the finish's dev phase paid for (the study's spend journal): its model calls, and those
   spent on front members whose train result left them no chance to clear the decision's bar (by
   the rule's own test, ``DecisionRule.dev_chance``, on the stored train evaluations; the best on
   train is exempt: the fallback needs it), and, in hindsight, on members that did not qualify on
   dev even on their point estimate. ``--study DIR`` reads these from a finished study folder alone.

Targets: actual / ideal <= 1.5; warm champion identical; no dev-phase call on a member that could
not qualify.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, TOOL, base_agent, figure, model_config  # noqa: E402

from evoharness.compiler.preflight import usable_workers  # noqa: E402

TARGET = 1.5
CONCURRENCY = 16  # conf/workload/bfcl.yaml


def search(runs: Path, cache: Path, *extra: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evoharness.search", f"runs_dir={runs}", f"cache_dir={cache}", *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return time.perf_counter() - start, proc


def outcome(runs: Path) -> dict[str, Any]:
    summary = json.loads(next(runs.glob("*/summary.json")).read_text(encoding="utf-8"))
    claim = summary["claim"] or {}
    return {"champion": summary["champion"]["variant_hash"], "front": sorted(m["variant_hash"] for m in summary["front"]),
            "claim": {k: claim.get(k) for k in ("verdict", "mean_diff", "low", "high", "n")}}


def cpu_per_episode() -> float:
    from evoharness.compiler.runtime.llm import ensure_providers
    from evoharness.compiler.sim import configure_sim
    from evoharness.compiler.variant import compile_agent
    from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    ensure_providers()
    configure_sim(None, time_scale=0.0)
    workload = BfclWorkload(categories=("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param"))
    tasks = list(workload.tasks("train"))[:60]
    variant = compile_agent(base_agent(), tool=TOOL, model=model_config("sim_large"))
    asyncio.run(evaluate_variant_async(variant, workload, "train", samples=1, seed=0, tasks=tasks[:10]))  # warm-up
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    asyncio.run(evaluate_variant_async(variant, workload, "train", samples=1, seed=0, tasks=tasks, concurrency=CONCURRENCY))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / len(tasks)


def union_s(intervals: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by at least one of ``intervals``."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _report(study: Path, eval_key: str | None) -> Any:
    from evoharness.search.evaluation.metrics import EvalReport

    path = study / "evals" / f"{eval_key}.json"
    return EvalReport.from_dict(json.loads(path.read_text(encoding="utf-8"))["report"]) if eval_key and path.exists() else None


def dev_phase(study: Path) -> dict[str, Any]:
    """The dev phase's model calls in a finished study folder, in all and on members that could not
    qualify: judged as the finish judges them now, whatever revision ran the study."""
    import optuna

    from evoharness.search.evaluation.decision import TrainStanding, decision_rule
    from evoharness.search.optimise.select_dev import paired_interval
    from evoharness.search.optimise.study import records

    summary = json.loads((study / "summary.json").read_text(encoding="utf-8"))
    conf = json.loads((study / "freeze.json").read_text(encoding="utf-8"))["resolved_config"]
    decision, s = summary["decision"], conf["search"]
    rule = decision_rule(decision["rule"], margin=float(decision.get("margin", conf["criteria"].get("margin", 0.05))))
    q = next(o["metric"] for o in summary["objectives"] if o["direction"] == "maximize")
    axis = (rule.resource() or ("cost_per_task", "cost"))[0]
    storage = f"sqlite:///{study / 'study.db'}"
    trials = [r for k in range(int(s["rounds"])) for r in records(optuna.load_study(study_name=f"{s['study']}/r{k}", storage=storage), k)]
    by_trial = {(r.round, r.number): r for r in trials}
    base = next(r for r in trials if r.origin == "baseline" and r.train)
    base_report = _report(study, base.eval_key)
    reference = TrainStanding(quality=float(base.train[q]), resource=float(base.train.get(axis, float("inf"))))
    rows = [json.loads(line) for line in (study / "spend.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    dev_rows = [r for r in rows if r["split"] == "dev"]
    calls = {r["variant_hash"]: int(r["model_calls"]) for r in dev_rows if str(r["label"]).startswith("front-")}
    ref_dev = summary["baseline"]["dev"]
    members, hopeless, missed = [], 0, 0
    for i, m in enumerate(summary["front"]):
        record = by_trial.get((m["round"], m["trial"]))
        paired = paired_interval(base_report, _report(study, record.eval_key if record else None), metric=q,
                                 confidence=float(s["confidence"]))
        mine = TrainStanding(quality=float(m["train"][q]), resource=float(m["train"].get(axis, float("inf"))),
                             low=paired[0] if paired else None, high=paired[1] if paired else None)
        chance = rule.train_chance(mine, reference, min_effect=float(s["min_effect"]), quality=q)
        why = None if i == 0 else chance.why
        paid = calls.get(m["variant_hash"], 0) if m.get("dev") else 0
        # in hindsight: no dev run on it could have made it the pick, not even on its dev point estimate
        failed = bool(m.get("dev")) and i > 0 and rule.resource() is not None and not (
            float(m["dev"].get(axis, float("inf"))) < float(ref_dev.get(axis, float("inf")))
            and float(m["dev"][q]) >= float(ref_dev[q]) - rule.margin)
        hopeless += paid if why else 0
        missed += paid if failed else 0
        members.append({"trial": m["trial"], "round": m["round"], "train": round(float(m["train"][q]), 3),
                        "paired": paired and [round(paired[0], 3), round(paired[1], 3)], "chance": chance.reach,
                        "dev": m.get("dev") and round(float(m["dev"][q]), 3), "dev_calls": paid, "skipped": m.get("dev_skipped")})
    return {"dev_calls": sum(int(r["model_calls"]) for r in dev_rows), "front_dev_calls": sum(calls.values()),
            "hopeless_calls": hopeless, "did_not_qualify_calls": missed, "members": members}


def dev_figures(study: Path) -> dict[str, Any]:
    d = dev_phase(study)
    figure("dev_phase_model_calls_on_members_that_could_not_qualify", d["hopeless_calls"], 0, d["hopeless_calls"] == 0,
           dev_phase_model_calls=d["dev_calls"], front_member_dev_calls=d["front_dev_calls"],
           share=round(d["hopeless_calls"] / max(d["dev_calls"], 1), 3), members=d["members"])
    figure("dev_phase_model_calls_on_members_that_did_not_qualify_on_dev", d["did_not_qualify_calls"], None, None,
           note="hindsight, the best on train exempt: neither cheaper (faster) than the incumbent on dev nor within the margin")
    return d


def _schedule(ready: float, durations: Sequence[float], slots: list[float]) -> float:
    """Start each job, in order, on the slot free first (none before ``ready``); when the last ends."""
    end = ready
    for d in durations:
        i = min(range(len(slots)), key=slots.__getitem__)
        slots[i] = max(slots[i], ready) + d
        end = max(end, slots[i])
    return end


def stream_vs_waves(study: Path, workers: int) -> dict[str, float]:
    """The rounds' race blocks, their recorded job times replayed two ways on ``workers`` slots: in
    waves as the search runs them (every proposal's next block starts once the whole wave ends), and
    as a stream (a proposal's next block starts the moment its own last one ends). What a stream
    would save, with the work and its order fixed: the race's blocks stay sequential per proposal."""
    import re

    chains: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for path in (study / "evals").glob("*.json"):
        d = json.loads(path.read_text(encoding="utf-8"))
        m, w = re.fullmatch(r"r(\d+)-t(\d+)(?:-([bx])(\d+))?", str(d.get("label"))), d.get("worker")
        if m and w:  # a merged whole carries its last block's worker record: only the blocks count
            order = int(m.group(4) or 0) + (1000 if m.group(3) == "x" else 0)
            chains.setdefault((int(m.group(1)), int(m.group(2))), []).append((order, float(w["ended"]) - float(w["started"])))
    waves = stream = 0.0
    for k in sorted({r for r, _ in chains}):
        mine = [sorted(set(c)) for (r, _), c in chains.items() if r == k]
        t = 0.0
        for j in range(max(len(c) for c in mine)):
            t = _schedule(t, [c[j][1] for c in mine if len(c) > j], [t] * workers)
        waves += t
        slots, ready, nxt, end = [0.0] * workers, [0.0] * len(mine), [0] * len(mine), 0.0
        while any(n < len(c) for n, c in zip(nxt, mine)):
            i = min((i for i in range(len(mine)) if nxt[i] < len(mine[i])), key=ready.__getitem__)
            ready[i] = _schedule(ready[i], [mine[i][nxt[i]][1]], slots)
            nxt[i] += 1
            end = max(end, ready[i])
        stream += end
    return {"rounds_in_waves_s": round(waves, 1), "rounds_streamed_s": round(stream, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, help="only the dev-phase figures, of this finished study folder (runs/<study>)")
    args = parser.parse_args(argv)
    if args.study:
        conf = json.loads((args.study / "freeze.json").read_text(encoding="utf-8"))["resolved_config"]
        st = stream_vs_waves(args.study, usable_workers(conf["search"]["population_size"]))
        figure("rounds_streamed_over_waves", round(st["rounds_streamed_s"] / max(st["rounds_in_waves_s"], 1e-9), 3), None, None, **st)
        d = dev_figures(args.study)
        print(f"summary: dev phase {d['dev_calls']} model calls, {d['hopeless_calls']} on members that could not qualify")
        return 0
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="evoharness-bench-wall-") as tmp:
        cache = Path(tmp) / "cache"
        cold_s, cold = search(Path(tmp) / "cold", cache)
        if cold.returncode != 0:
            raise SystemExit(f"search failed: {cold.stderr[-2000:]}")
        episodes, floors, jobs = 0, [], []
        # a raced proposal's blocks merged into its full evaluation are stored beside the blocks, under
        # the last block's worker record: per job, only the record with the fewest episodes is its own
        own: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
        for path in (Path(tmp) / "cold").glob("*/evals/*.json"):
            record = json.loads(path.read_text(encoding="utf-8"))
            w = record["worker"] or {}
            key = (w.get("host"), w.get("pid"), w.get("started"))
            if key not in own or len(record["report"]["episodes"]) < len(own[key]["report"]["episodes"]):
                own[key] = record
        for record in own.values():
            eps = record["report"]["episodes"]
            lat = [float(e["latency_s"]) for e in eps]
            episodes += len(eps)
            floors.append(max(max(lat, default=0.0), sum(lat) / CONCURRENCY))
            jobs.append(record["worker"])
        sequential = sum(floors)
        frozen = json.loads(next((Path(tmp) / "cold").glob("*/freeze.json")).read_text(encoding="utf-8"))
        workers = usable_workers(frozen["resolved_config"]["search"]["population_size"])
        floor = max(max(floors, default=0.0), sequential / workers)
        per = cpu_per_episode()
        ideal = max(episodes * per / cores, floor)
        study_dir = next((Path(tmp) / "cold").glob("*/summary.json")).parent
        streamed = stream_vs_waves(study_dir, workers)
        dev = dev_figures(study_dir)
        warm_s, warm = search(Path(tmp) / "warm", cache)
        same = warm.returncode == 0 and outcome(Path(tmp) / "warm") == outcome(Path(tmp) / "cold")
    ratio = cold_s / ideal
    # where the time went: the CPU the jobs' processes spent (against the same episodes in one
    # process here), and the wall time in which no job ran at all (start-up, the orchestrator's
    # work between batches and rounds, the finish's bookkeeping)
    jobs_cpu = sum(float(w.get("cpu_s", 0.0)) for w in jobs)
    no_job = cold_s - union_s([(float(w["started"]), float(w["ended"])) for w in jobs])
    figure("main_job_actual_over_ideal", round(ratio, 2), TARGET, ratio <= TARGET, actual_s=round(cold_s, 1), ideal_s=round(ideal, 1),
           cpu_floor_s=round(episodes * per / cores, 1), latency_floor_s=round(floor, 1),
           one_at_a_time_latency_floor_s=round(sequential, 1),
           actual_over_one_at_a_time_floor=round(cold_s / max(sequential, episodes * per / cores), 2), episodes=episodes,
           cpu_ms_per_episode=round(per * 1000, 1), cores=cores, workers=workers)
    figure("jobs_cpu_ms_per_episode", round(jobs_cpu / max(episodes, 1) * 1000, 1), None, None, jobs_cpu_s=round(jobs_cpu, 1),
           in_process_cpu_ms_per_episode=round(per * 1000, 1), jobs=len(jobs),
           cores_busy_with_jobs=round(jobs_cpu / cold_s, 2), cores=cores)
    figure("wall_s_with_no_job_running", round(no_job, 1), None, None, share_of_actual=round(no_job / cold_s, 3))
    figure("rounds_streamed_over_waves", round(streamed["rounds_streamed_s"] / max(streamed["rounds_in_waves_s"], 1e-9), 3), None, None,
           **streamed, note="recorded job times replayed: what a per-proposal stream of race blocks would save over the waves")
    figure("warm_rerun_identical_champion", same, True, same, warm_s=round(warm_s, 1))
    print(f"summary: main job {cold_s:.0f} s cold against an ideal of {ideal:.0f} s ({episodes} episodes x {per * 1000:.0f} ms CPU "
          f"/ {cores} cores, latency floor {floor:.0f} s): {ratio:.2f}x (target <= {TARGET}); warm rerun {warm_s:.0f} s, "
          f"same champion: {same}; dev phase {dev['dev_calls']} model calls, {dev['hopeless_calls']} on members that could not qualify")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
