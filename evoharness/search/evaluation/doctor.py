"""The workload check (`evoharness doctor`): is this workload fit to judge an agent?

Each check runs the real episode loop, the workload's environment and its scorer. The model is
replaced by a replay whose replies litellm itself builds (``mock_response`` / ``mock_tool_calls``):
no network, no key. What a replay cannot tell is said, not guessed.

- **Gold replay**: a model that makes exactly the reference calls of every turn (then gives the
  reference answer) must pass every task that has gold. A failure here is the workload's bug (or
  a gold call its own tool specs reject), never the agent's.
- **Do-nothing model**: a model that answers without calling anything. Its pass rate is printed;
  a high one means the scorer is lenient.
- **Determinism**: two environments built with the same seed start in the same state, and the
  gold replay scores the same twice.
- **Final state is scored**: on tasks whose turn reads and then writes, the gold replay without
  its last write must fail. A workload whose truncated replays all pass does not read the state
  the agent leaves.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evoharness.compiler.route import ModelParams, RouteSettings
from evoharness.compiler.runtime.loop import run_episode
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.runtime.workload import SPLITS, EpisodeScore, Split, Task, Workload
from evoharness.compiler.variant import HarnessVariant

LENIENT_SHARE = 0.5  # the do-nothing model may pass at most this share of the tasks that have reference calls
REPLAY_ROUTE = "openai/evoharness-replay"  # litellm answers a mock request itself: the name is never sent anywhere
NULL_ANSWER = "I cannot help with that."


class ReplayClient(ModelClient):
    """One episode's scripted model: per turn, the given calls one at a time, then the answer.
    A workflow step after the answer is answered again; anything else starts the next turn."""

    def __init__(self, calls: Sequence[Sequence[ToolCall]], answers: Sequence[str | None]) -> None:
        super().__init__(ModelParams(route=REPLAY_ROUTE), RouteSettings(input_cost_per_token=0.0, output_cost_per_token=0.0,
                                                                         retries=0, concurrency=1))
        self.calls, self.answers = [list(t) for t in calls], list(answers)
        self.turn, self.next_call, self.answered, self.seen = 0, 0, False, 0

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], user: str, *,
                seed: int | None = None) -> dict[str, Any]:
        new = messages[self.seen:]  # what the loop appended since our last reply
        if self.answered:
            step = bool(new) and all(m.get("role") == "user" and str(m.get("content", "")).lstrip().startswith("<workflow_step")
                                     for m in new)
            if not step:  # the next turn's messages (none for an empty turn)
                self.turn, self.next_call, self.answered = self.turn + 1, 0, False
        self.seen = len(messages) + 1  # our reply comes next
        req = super().request(messages, tools, user, seed=seed)
        todo = self.calls[self.turn] if self.turn < len(self.calls) else []
        if self.next_call < len(todo):
            call = todo[self.next_call]
            self.next_call += 1
            req["mock_tool_calls"] = [{"id": f"call_{self.turn}_{self.next_call}", "type": "function",
                                       "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))}}]
            req["mock_response"] = ""
            return req
        self.answered = True
        answer = self.answers[self.turn] if self.turn < len(self.answers) else None
        req["mock_response"] = answer or "Done."
        return req


@dataclass(frozen=True)
class TaskCheck:
    task_id: str
    split: Split
    has_gold: bool
    gold: EpisodeScore | None  # the gold replay's score (None without gold)
    null_passed: bool
    deterministic: bool  # same start state for the same seed, and the same gold score twice
    state_check: bool | None  # None: no read-then-write turn; True: the replay without its last write failed
    detail: str = ""


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[TaskCheck, ...]

    def split_rows(self) -> list[dict[str, Any]]:
        rows = []
        for split in dict.fromkeys(c.split for c in self.checks):
            cs = [c for c in self.checks if c.split == split]
            gold = [c for c in cs if c.has_gold]
            state = [c for c in gold if c.state_check is not None and c.gold is not None and c.gold.passed]
            rows.append({"split": split, "tasks": len(cs), "with_gold": len(gold),
                         "gold_passed": sum(1 for c in gold if c.gold is not None and c.gold.passed),
                         "null_pass_rate": sum(c.null_passed for c in cs) / len(cs) if cs else 0.0,
                         "deterministic": sum(c.deterministic for c in cs),
                         "state_checked": len(state), "state_scored": sum(1 for c in state if c.state_check)})
        return rows

    def gates(self) -> dict[str, bool | None]:
        """Each gate's verdict; None when nothing could test it (shown as n/a, and not a pass)."""
        gold = [c for c in self.checks if c.has_gold]
        # a truncated replay only tells something when the full replay passed
        state = [c for c in gold if c.state_check is not None and c.gold is not None and c.gold.passed]
        return {
            "every split has tasks": {c.split for c in self.checks} >= set(SPLITS),
            "gold replay passes": bool(gold) and all(c.gold is not None and c.gold.passed for c in gold),
            # a scorer that passes a model doing nothing on most tasks with reference calls is not judging them
            "do-nothing model fails": (sum(c.null_passed for c in gold) <= LENIENT_SHARE * len(gold)) if gold else None,
            "deterministic": all(c.deterministic for c in self.checks),
            # one truncated replay that fails is enough to show the scorer reads the final state
            "final state scored": any(c.state_check for c in state) if state else None,
        }

    @property
    def passed(self) -> bool:
        return all(v is not False for v in self.gates().values())

    def failures(self) -> list[str]:
        """Every task whose gold replay failed, with why."""
        bad = [c for c in self.checks if c.has_gold and not (c.gold and c.gold.passed)]
        return [f"{c.task_id}: {c.detail or (c.gold.detail if c.gold else '')}"[:300] for c in bad]


async def _score(variant: HarnessVariant, workload: Workload, task: Task, calls: Sequence[Sequence[ToolCall]],
                 answers: Sequence[str | None], seed: int) -> tuple[EpisodeScore | None, str]:
    env = workload.make_environment(task, seed=seed)
    replay = ReplayClient(calls, answers)  # a turn handed over replays the same reference calls
    trajectory = await run_episode(variant, task, env, seed=seed, client=replay, escalate_to=replay)
    if trajectory.status == "infra_error":
        return None, f"the loop could not run the replay: {trajectory.infra_error}"
    errors = [f"{c.name}: {c.error}" for c in trajectory.tool_calls if c.error]
    if trajectory.status == "max_turns":
        longest = max((len(t) for t in calls), default=0)
        errors.insert(0, f"agent.max_turns={variant.max_turns} model calls per turn cut the replay short (the reference makes "
                         f"{longest} calls in one turn, and the replay, like the simulated models, makes one call per reply)")
    return workload.score(task, trajectory, env), ("; ".join(errors[:2]) if errors else "")


def _without_last_write(task: Task, mutates: Mapping[str, bool]) -> list[list[ToolCall]] | None:
    """The gold with the last write of the last turn that reads before it writes, or None."""
    for t in range(len(task.gold) - 1, -1, -1):
        calls = list(task.gold[t])
        writes = [i for i, c in enumerate(calls) if mutates.get(c.name, False)]
        if writes and any(not mutates.get(c.name, False) for c in calls[: writes[-1]]):
            out = [list(turn) for turn in task.gold]
            out[t] = calls[: writes[-1]] + calls[writes[-1] + 1:]
            return out
    return None


async def check_task(variant: HarnessVariant, workload: Workload, task: Task, *, seed: int,
                     mutates: Mapping[str, bool]) -> TaskCheck:
    same_start = _snapshot(workload, task, seed) == _snapshot(workload, task, seed)
    null, _ = await _score(variant, workload, task, [[] for _ in task.turns], [NULL_ANSWER] * len(task.turns), seed)
    if not any(task.gold):
        return TaskCheck(task.task_id, task.split, False, None, bool(null and null.passed), same_start, None)
    gold, why = await _score(variant, workload, task, task.gold, task.answers, seed)
    again, _ = await _score(variant, workload, task, task.gold, task.answers, seed)
    stable = same_start and (gold is not None and again is not None and (gold.passed, gold.score) == (again.passed, again.score))
    truncated = _without_last_write(task, mutates)
    state: bool | None = None
    if truncated is not None:
        cut, _ = await _score(variant, workload, task, truncated, task.answers, seed)
        state = cut is not None and not cut.passed
    return TaskCheck(task.task_id, task.split, True, gold, bool(null and null.passed), stable, state, why)


def _snapshot(workload: Workload, task: Task, seed: int) -> str:
    return json.dumps(workload.make_environment(task, seed=seed).snapshot(), sort_keys=True, default=str)


def run_doctor(variant: HarnessVariant, workload: Workload, tasks: Sequence[Task], *, seed: int = 0,
               concurrency: int = 8) -> DoctorReport:
    """Every check on ``tasks``, on ``variant``'s harness with its tools offered natively."""
    replay = replace(variant, tool_format="json") if variant.tool_format != "json" else variant
    mutates = {s.name: s.mutates_state for s in workload.tool_specs()}

    async def main() -> list[TaskCheck]:
        gate = asyncio.Semaphore(concurrency)

        async def one(task: Task) -> TaskCheck:
            async with gate:
                return await check_task(replay, workload, task, seed=seed, mutates=mutates)

        return list(await asyncio.gather(*(one(t) for t in tasks)))

    return DoctorReport(tuple(asyncio.run(main())))


def doctor_table(report: DoctorReport) -> str:
    head = ["split", "tasks", "with gold", "gold passes", "do-nothing passes", "deterministic", "final state scored"]
    rows = [head] + [[r["split"], str(r["tasks"]), str(r["with_gold"]), f"{r['gold_passed']}/{r['with_gold']}",
                      f"{100 * r['null_pass_rate']:.1f}%", f"{r['deterministic']}/{r['tasks']}",
                      f"{r['state_scored']}/{r['state_checked']}" if r["state_checked"] else "-"] for r in report.split_rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)
