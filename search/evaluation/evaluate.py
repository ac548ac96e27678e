"""evaluate_variant: run a variant's episodes concurrently on a workload split and aggregate.

Infrastructure failures come back from the runtime as skipped episodes; they are never
scored. Every other episode is scored by the workload's own scorer.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from compiler.runtime.cache import ResponseCache
from compiler.runtime.loop import run_episode
from compiler.runtime.models import ModelClient
from compiler.runtime.trajectory import Trajectory
from compiler.runtime.workload import Task, Workload
from compiler.variant import HarnessVariant
from search.evaluation.metrics import EpisodeResult, EvalReport, aggregate


async def _episode(
    variant: HarnessVariant, workload: Workload, task: Task, sample: int, seed: int, client: ModelClient
) -> tuple[EpisodeResult, Trajectory]:
    env = workload.make_environment(task, seed=seed)
    trajectory = await run_episode(variant, task, env, sample=sample, seed=seed, client=client)
    score = None if trajectory.status == "infra_error" else workload.score(task, trajectory, env)
    return EpisodeResult.from_episode(trajectory, score), trajectory


async def evaluate_variant_async(
    variant: HarnessVariant,
    workload: Workload,
    split: str,
    *,
    samples: int = 1,
    concurrency: int = 16,
    seed: int = 0,
    tasks: Sequence[Task] | None = None,
    cache: ResponseCache | None = None,
    progress: bool = False,
    keep_trajectories: bool = False,
) -> tuple[EvalReport, list[Trajectory]]:
    if samples < 1:
        raise ValueError(f"workload.samples={samples}: need at least one sample per task")
    chosen = list(tasks) if tasks is not None else list(workload.tasks(split))
    if not chosen:
        raise ValueError(f"workload.split={split!r}: no tasks; use train, dev or holdout")
    client = ModelClient(variant.model, variant.route, cache=cache)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def guarded(task: Task, sample: int) -> tuple[EpisodeResult, Trajectory]:
        async with gate:
            return await _episode(variant, workload, task, sample, seed, client)

    jobs = [guarded(t, s) for t in chosen for s in range(samples)]
    if progress:
        from tqdm.asyncio import tqdm

        done = await tqdm.gather(*jobs, desc=f"{split} {variant.model.route}", unit="ep", leave=False)
    else:
        done = await asyncio.gather(*jobs)
    report = aggregate([r for r, _ in done], variant_hash=variant.content_hash, split=split, samples=samples)
    return report, ([t for _, t in done] if keep_trajectories else [])


def evaluate_variant(
    variant: HarnessVariant,
    workload: Workload,
    split: str,
    *,
    samples: int = 1,
    concurrency: int = 16,
    seed: int = 0,
    tasks: Sequence[Task] | None = None,
    cache: ResponseCache | None = None,
    progress: bool = False,
) -> EvalReport:
    """Evaluate on ``split`` with ``samples`` per task; see EvalReport for the metrics."""
    report, _ = asyncio.run(
        evaluate_variant_async(
            variant, workload, split, samples=samples, concurrency=concurrency, seed=seed, tasks=tasks, cache=cache, progress=progress
        )
    )
    return report
