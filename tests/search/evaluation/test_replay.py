"""Warm is a replay: an evaluation whose every reply is cached reads its episodes back (no
environment, no tools, no scorer) and gives what playing them again from the cache gives; a
missing reply, another seed, a damaged or foreign entry and live tools all make an episode play."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.runtime.cache import ResponseCache
from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.runtime.workload import Environment, EpisodeScore, Task
from evoharness.compiler.sim import configure_sim, reset_sim
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.evaluate import evaluate_variant, evaluate_variant_async
from evoharness.search.evaluation.replay import EpisodeStore
from tests.search.evaluation.test_evaluate import variant

ROOT = Path(__file__).resolve().parents[3]
DEV = list(BfclWorkload().tasks("dev"))[:6]


class Counted(BfclWorkload):
    """BFCL, counting the episodes actually played (an environment made, a trajectory scored)."""

    live: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.played: list[str] = []

    def make_environment(self, task: Task, *, seed: int) -> Environment:
        self.played.append(task.task_id)
        return super().make_environment(task, seed=seed)

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore:
        return super().score(task, trajectory, environment)

    @property
    def live_tools(self) -> tuple[str, ...]:
        return self.live


class RepliesOnly:
    """The same folder as a plain reply cache: every episode plays, its replies from the cache."""

    remote = False

    def __init__(self, root: Path) -> None:
        self.inner = ResponseCache(root)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        self.inner.put(key, value)


@pytest.fixture(autouse=True)
def fast_sim() -> Iterator[None]:
    configure_sim(None, time_scale=0.0)
    yield
    reset_sim()


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "episodes").rglob("*.json"))


def usage(r: EpisodeResult) -> tuple[Any, ...]:
    return (r.task_id, r.sample, r.status, r.passed, r.score, r.cost_usd, r.latency_s, r.prompt_tokens, r.completion_tokens,
            r.model_calls, r.tool_calls, r.tool_errors, r.detail, r.failures, r.billed_cost_usd, r.billed_tokens, r.attempts)


def test_a_warm_evaluation_is_a_replay_equal_to_playing_it_from_the_cache(tmp_path: Path) -> None:
    v, workload = variant("sim/small", temperature=0.7), Counted()
    cold = evaluate_variant(v, workload, "dev", tasks=DEV, samples=2, seed=5, cache=ResponseCache(tmp_path))
    assert len(workload.played) == 12 and len(entries(tmp_path)) == 12
    assert cold.metrics["billed_tokens"] > 0

    workload.played.clear()
    warm = evaluate_variant(v, workload, "dev", tasks=DEV, samples=2, seed=5, cache=ResponseCache(tmp_path))
    assert workload.played == []  # no environment, no tool, no scorer: every episode read back
    played = evaluate_variant(v, workload, "dev", tasks=DEV, samples=2, seed=5, cache=RepliesOnly(tmp_path))  # type: ignore[arg-type]
    assert len(workload.played) == 12  # the same episodes played, every reply from the cache

    assert [usage(r) for r in warm.episodes] == [usage(r) for r in played.episodes]
    assert warm.metrics == played.metrics
    assert warm.metrics["billed_tokens"] == 0 and warm.metrics["billed_cost"] == 0
    same = {k: v for k, v in cold.metrics.items() if not k.startswith(("billed", "attempts", "infra"))}  # what a warm run never pays
    assert {k: warm.metrics[k] for k in same} == same


def test_a_missing_reply_another_seed_or_variant_plays_the_episode(tmp_path: Path) -> None:
    v, workload = variant("sim/small"), Counted()
    cold = evaluate_variant(v, workload, "dev", tasks=DEV, samples=1, cache=ResponseCache(tmp_path))
    entry = json.loads(entries(tmp_path)[0].read_text())
    gone = entry["replies"][-1]
    (tmp_path / gone[:2] / f"{gone}.json").unlink()

    workload.played.clear()
    warm = evaluate_variant(v, workload, "dev", tasks=DEV, samples=1, cache=ResponseCache(tmp_path))
    assert workload.played == [entry["result"]["task_id"]]
    assert [usage(r)[:14] for r in warm.episodes] == [usage(r)[:14] for r in cold.episodes]
    assert 0 < warm.metrics["billed_tokens"] < cold.metrics["billed_tokens"]  # only the lost reply paid again

    workload.played.clear()
    evaluate_variant(v, workload, "dev", tasks=DEV, samples=1, seed=1, cache=ResponseCache(tmp_path))
    assert len(workload.played) == 6
    workload.played.clear()
    evaluate_variant(variant("sim/small", max_tokens=900), workload, "dev", tasks=DEV, samples=1, cache=ResponseCache(tmp_path))
    assert len(workload.played) == 6


def test_a_damaged_or_foreign_entry_plays_the_episode(tmp_path: Path) -> None:
    v, workload = variant("sim/small"), Counted()
    cold = evaluate_variant(v, workload, "dev", tasks=DEV, samples=1, cache=ResponseCache(tmp_path))
    files = entries(tmp_path)
    by_task = {json.loads(f.read_text())["result"]["task_id"]: f for f in files}
    first, second = (by_task[t.task_id] for t in DEV[:2])
    second.write_text(first.read_text())  # another episode's entry under this one's key
    by_task[DEV[2].task_id].write_text("{not json")
    by_task[DEV[3].task_id].write_text(json.dumps({**json.loads(first.read_text()), "version": 99}))
    own = json.loads(by_task[DEV[4].task_id].read_text())  # its replies named as paths: never looked up, never trusted
    by_task[DEV[4].task_id].write_text(json.dumps({**own, "replies": ["../../" + r for r in own["replies"]]}))
    below = json.loads(by_task[DEV[5].task_id].read_text())  # a call's cost that no bill can be
    below["trajectory"]["model_calls"][0]["cost_usd"] = -0.002
    by_task[DEV[5].task_id].write_text(json.dumps(below))

    workload.played.clear()
    warm = evaluate_variant(v, workload, "dev", tasks=DEV, samples=1, cache=ResponseCache(tmp_path))
    assert sorted(workload.played) == sorted(t.task_id for t in DEV[1:6])
    assert [usage(r)[:14] for r in warm.episodes] == [usage(r)[:14] for r in cold.episodes]


def test_live_tools_are_never_replayed_nor_stored(tmp_path: Path) -> None:
    workload = Counted()
    workload.live = ("ls",)
    evaluate_variant(variant("sim/small"), workload, "dev", tasks=DEV[:2], samples=1, cache=ResponseCache(tmp_path))
    evaluate_variant(variant("sim/small"), workload, "dev", tasks=DEV[:2], samples=1, cache=ResponseCache(tmp_path))
    assert entries(tmp_path) == [] and len(workload.played) == 4


class Kept:
    remote = False

    def __init__(self) -> None:
        self.kept: list[str] = []

    def has_all(self, keys: Sequence[str]) -> bool:
        return True

    def get_episode(self, key: str) -> dict[str, Any] | None:
        return None

    def put_episode(self, key: str, value: Mapping[str, Any]) -> None:
        self.kept.append(key)


def test_an_outage_or_an_uncached_call_is_not_stored(tmp_path: Path) -> None:
    cache = Kept()
    store = EpisodeStore(cache, "base")
    task = DEV[0]
    outage = Trajectory(task.task_id, 0, 0, "v", "infra_error", infra_error="timeout")
    store.keep(task, 0, 0, EpisodeResult.from_episode(outage, None), outage)
    from evoharness.compiler.runtime.trajectory import ModelCallRecord

    call = ModelCallRecord(turn=0, prompt_tokens=1, completion_tokens=1, cost_usd=0.0, latency_s=0.1, finish_reason="stop")
    unkeyed = Trajectory(task.task_id, 0, 0, "v", "completed", model_calls=(call,), responses=("done",))
    score = EpisodeScore(passed=True, score=1.0, delivered=True)
    store.keep(task, 0, 0, EpisodeResult.from_episode(unkeyed, score), unkeyed)
    keyed = Trajectory(task.task_id, 0, 0, "v", "completed", model_calls=(ModelCallRecord(**{**call.__dict__, "request_key": "a" * 64}),),
                       responses=("done",))
    store.keep(task, 0, 0, EpisodeResult.from_episode(keyed, score), keyed)
    store.flush()
    assert cache.kept == [store.key(task, 0, 0)]  # only the episode whose every call has a cached reply


def test_a_replay_hands_back_its_trajectories_marked_cached(tmp_path: Path) -> None:
    import asyncio

    v, workload = variant("sim/small"), Counted()
    evaluate_variant(v, workload, "dev", tasks=DEV[:2], samples=1, cache=ResponseCache(tmp_path))
    workload.played.clear()
    _, trajectories = asyncio.run(evaluate_variant_async(v, workload, "dev", tasks=DEV[:2], cache=ResponseCache(tmp_path),
                                                         keep_trajectories=True))
    assert workload.played == [] and len(trajectories) == 2
    assert all(c.cached and c.attempts == 0 and len(c.request_key) == 64 for t in trajectories for c in t.model_calls)


def test_a_warm_evaluate_command_imports_neither_litellm_nor_the_simulator(tmp_path: Path) -> None:
    code = ("import sys; from evoharness.search.cli.main import main; code = main(sys.argv[1:]); "
            "print('MODULES', sorted(m for m in ('litellm', 'evoharness.compiler.sim.engine', 'scipy') if m in sys.modules)); "
            "sys.exit(code)")
    args = ["evaluate", f"runs_dir={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}", "workload.limit=3"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cold = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert cold.returncode == 0, cold.stderr[-2000:]
    assert "'litellm'" in cold.stdout  # the cold run called the model: the check below can tell
    warm = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr[-2000:]
    assert "MODULES []" in warm.stdout, warm.stdout[-500:]
