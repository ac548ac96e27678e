"""evaluate_variant: run a variant's episodes concurrently on a workload split and aggregate.

Infrastructure failures come back from the runtime as skipped episodes; they are never
scored. Every other episode is scored by the workload's own scorer.

Repeats that buy no information are not paid for: at temperature 0 a deterministic route answers
every sample of a task alike, but whether a route is deterministic is measured, never assumed
from its name. The first ``probe`` tasks run every sample; only when each of them gave identical
trajectories do the other tasks run one sample (``metrics["samples_skipped"]`` counts the
episodes not run). Any difference, or any infrastructure failure among the probe's, and every
sample is run; a later task whose one sample failed on the infrastructure runs its other samples.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.cache import ReplyCache
from evoharness.compiler.runtime.llm import drain_litellm_logging
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.runtime.workload import Split, Task, Workload
from evoharness.compiler.variant import HarnessVariant, content_hash
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import EvalReport, aggregate
from evoharness.search.evaluation.replay import EpisodeStore, episode_store

log = logging.getLogger(__name__)


async def _episode(
    variant: HarnessVariant, workload: Workload, task: Task, sample: int, seed: int, client: ModelClient,
    store: EpisodeStore | None = None, strong: ModelClient | None = None,
) -> tuple[EpisodeResult, Trajectory]:
    if store is not None:
        warm = await asyncio.to_thread(store.read, task, sample, seed) if store.remote else store.read(task, sample, seed)
        if warm is not None:
            return warm
    env = workload.make_environment(task, seed=seed)
    trajectory = await run_episode(variant, task, env, sample=sample, seed=seed, client=client, escalate_to=strong)
    score = None if trajectory.status == "infra_error" else workload.score(task, trajectory, env)
    result = EpisodeResult.from_episode(trajectory, score)
    if store is not None:
        store.keep(task, sample, seed, result, trajectory)
    return result, trajectory


REPEAT_PROBE = 4  # tasks whose every sample runs before a temperature-0 variant's repeats are judged


def fingerprint(trajectory: Trajectory) -> str:
    """What a sample did, independent of its sample number and timing: its calls, their results,
    its answers and how it ended."""
    return content_hash({"status": trajectory.status, "responses": list(trajectory.responses),
                         "calls": [[c.turn, c.name, dict(c.arguments), c.result, c.error] for c in trajectory.tool_calls]})


def repeats_identical(probed: Sequence[Trajectory]) -> bool:
    """Whether every task's samples among ``probed`` did exactly the same thing (an infrastructure
    failure counts as a difference: the repeat was not observed)."""
    by_task: dict[str, set[str]] = {}
    for t in probed:
        by_task.setdefault(t.task_id, set()).add("infra" if t.status == "infra_error" else fingerprint(t))
    return bool(by_task) and all(len(v) == 1 and "infra" not in v for v in by_task.values())


def _bar(desc: str, total: int) -> Any:
    """One progress line for the whole evaluation, every episode counted as it ends (a repeat the
    probe lets stand in is taken off the total, not shown as work left)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="ep", leave=False, dynamic_ncols=True)


_WARNED: set[tuple[str, int, int]] = set()


def route_cap_warning(variant: HarnessVariant, concurrency: int, in_flight: int) -> str | None:
    """A line when the route's own limit would hold the run below its episode concurrency (once
    per route and pair of limits per process), else None: a cap is never silent."""
    limit = max(1, variant.route.concurrency)
    key = (variant.model.route, limit, concurrency)
    if in_flight <= limit or key in _WARNED:
        return None
    _WARNED.add(key)
    return (f"model.concurrency={limit} caps {variant.model.route} at {limit} calls in flight while "
            f"workload.concurrency={concurrency} runs {in_flight} episodes at once: raise model.concurrency to {in_flight} "
            "if the provider allows that many, or lower workload.concurrency")


async def evaluate_variant_async(
    variant: HarnessVariant,
    workload: Workload,
    split: Split,
    *,
    samples: int = 1,
    concurrency: int = 16,
    seed: int = 0,
    tasks: Sequence[Task] | None = None,
    cache: ReplyCache | None = None,
    progress: bool = False,
    keep_trajectories: bool = False,
    probe: int = REPEAT_PROBE,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[EvalReport, list[Trajectory]]:
    """The evaluation's report (and the played episodes' trajectories, with ``keep_trajectories``).
    Once ``stop()`` is true no new episode starts: those in flight finish, and the report holds the
    episodes that ran (no repeat stands in for one that did not)."""
    if samples < 1:
        raise ValueError(f"workload.samples={samples}: need at least one sample per task")
    chosen = list(tasks) if tasks is not None else list(workload.tasks(split))
    if not chosen:
        raise ValueError(f"workload.split={split!r}: no tasks; use train, dev or holdout")
    client = ModelClient(variant.model, variant.route, cache=cache)
    # the escalation route's own client: its concurrency limit, prices and cached replies are that route's
    strong = ModelClient(variant.escalation.model, variant.escalation.route, cache=cache) if variant.escalation else None
    store = episode_store(variant, workload, client, cache, strong=strong)
    capped = route_cap_warning(variant, concurrency, min(concurrency, len(chosen) * samples))
    if capped:
        log.warning(capped)
    gate = asyncio.Semaphore(max(1, concurrency))
    fatal: list[ConfigError] = []  # a setup error found mid-run (a tool-output replay miss): it stops the evaluation

    bar = _bar(f"{split} {variant.model.route}", len(chosen) * samples) if progress else None

    async def guarded(task: Task, sample: int) -> tuple[EpisodeResult, Trajectory]:
        async with gate:
            if fatal or stop():  # no new episode starts; the ones in flight finish, so nothing is left half-done
                return None  # type: ignore[return-value]
            try:
                return await _episode(variant, workload, task, sample, seed, client, store, strong)
            except ConfigError as exc:
                fatal.append(exc)
                return None  # type: ignore[return-value]
            finally:
                if bar is not None:
                    bar.update(1)

    def stop_if_fatal() -> None:
        if fatal:
            raise fatal[0]

    # repeats may stand in only where every route an episode can reach decodes greedily
    greedy = float(variant.model.temperature) == 0.0 and (variant.escalation is None or float(variant.escalation.model.temperature) == 0.0)
    judged = samples > 1 and probe > 0 and greedy and len(chosen) > probe
    try:
        async with client, (strong or contextlib.nullcontext()):  # flush the cache's writes on the way out, an error included
            if not judged:
                done = list(await asyncio.gather(*[guarded(t, s) for t in chosen for s in range(samples)]))
                stop_if_fatal()
                stand_ins: list[EpisodeResult] = []
            else:
                head, tail = chosen[:probe], chosen[probe:]
                # the probe's samples go first through the gate; every task's first sample runs meanwhile
                probing = [asyncio.ensure_future(guarded(t, s)) for t in head for s in range(samples)]
                firsts = [asyncio.ensure_future(guarded(t, 0)) for t in tail]
                probed = await asyncio.gather(*probing)
                if fatal or stop():
                    ran = await asyncio.gather(*firsts)
                    stop_if_fatal()
                probed_all = [p for p in probed if p is not None]
                repeat = not repeats_identical([traj for _, traj in probed_all]) or stop()
                if bar is not None and not repeat:  # the repeats the probe found identical stand in: not run
                    bar.total -= len(tail) * (samples - 1)
                    bar.refresh()
                extra = list(await asyncio.gather(*[guarded(t, s) for t in tail for s in range(1, samples)] if repeat else []))
                ran = await asyncio.gather(*firsts)
                stop_if_fatal()
                # a task whose one sample was lost to the infrastructure has nothing to stand in for: its other samples run
                lost = [] if repeat else [t for t, r in zip(tail, ran) if r is not None and r[1].status == "infra_error"]
                if bar is not None and lost:
                    bar.total += len(lost) * (samples - 1)
                extra += await asyncio.gather(*[guarded(t, s) for t in lost for s in range(1, samples)])
                stop_if_fatal()
                done = [*probed, *ran, *extra]
                stand_ins = [] if repeat else [replace(x[0], sample=s) for x in ran if x is not None and x[1].status != "infra_error"
                                               for s in range(1, samples)]
            done = [d for d in done if d is not None]  # those a stop kept from starting
    finally:  # the episodes stored so far land, an error included, as the replies do
        if bar is not None:
            bar.refresh()  # its last count shown, whatever the refresh interval skipped
            bar.close()
        if store is not None:
            await asyncio.to_thread(store.flush)
    await drain_litellm_logging()
    report = aggregate([r for r, _ in done], variant_hash=variant.content_hash, split=split, samples=samples,
                       stand_ins=stand_ins, clusters={t.task_id: t.cluster for t in chosen})
    return report, ([t for _, t in done] if keep_trajectories else [])


def evaluate_variant(
    variant: HarnessVariant,
    workload: Workload,
    split: Split,
    *,
    samples: int = 1,
    concurrency: int = 16,
    seed: int = 0,
    tasks: Sequence[Task] | None = None,
    cache: ReplyCache | None = None,
    progress: bool = False,
    probe: int = REPEAT_PROBE,
) -> EvalReport:
    """Evaluate on ``split`` with ``samples`` per task; see EvalReport for the metrics."""
    report, _ = asyncio.run(
        evaluate_variant_async(
            variant, workload, split, samples=samples, concurrency=concurrency, seed=seed, tasks=tasks, cache=cache,
            progress=progress, probe=probe,
        )
    )
    return report
