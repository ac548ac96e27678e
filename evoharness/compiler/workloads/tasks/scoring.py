"""The tasks-file workload's default scorer: every check a task gives must hold. Pure: a task, a
trajectory and the final state in, a score with structured failures out.

- **Expected calls** (per turn): each must have been made in that turn, with equal arguments.
  The episode's calls are paired with the expected ones, exact matches first, so one wrong value
  is one ``wrong_value`` record and a call never made is one ``missed_call``.
- **Expected state**: each key given must equal the final state's (``wrong_state``).
- **Reference answers**: each must appear in its turn's final answer, ignoring case and spacing
  (``wrong_answer``).

An episode delivers when it made a call or the task expects none; the gate is this workload's
decision (docs/workloads.md).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.runtime.workload import EpisodeScore, Failure, Task


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def _turn_failures(turn: int, expected: Sequence[ToolCall], made: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Failure]:
    left = list(made)
    unmatched: list[ToolCall] = []
    for e in expected:  # exact matches first
        hit = next((i for i, (n, a) in enumerate(left) if n == e.name and dict(a) == dict(e.arguments)), None)
        if hit is None:
            unmatched.append(e)
        else:
            left.pop(hit)
    out: list[Failure] = []
    for e in unmatched:
        same = next((i for i, (n, _) in enumerate(left) if n == e.name), None)
        if same is None:
            out.append(Failure("missed_call", tool=e.name, turn=turn))
            continue
        _, got = left.pop(same)
        for arg, want in e.arguments.items():
            if arg not in got:
                out.append(Failure("missing_argument", tool=e.name, argument=arg, expected=want, turn=turn))
            elif got[arg] != want:
                out.append(Failure("wrong_value", tool=e.name, argument=arg, expected=want, got=got[arg], turn=turn))
        out += [Failure("extra_argument", tool=e.name, argument=a, got=got[a], turn=turn) for a in got if a not in e.arguments]
    return out


def score_episode(task: Task, trajectory: Trajectory, state: Mapping[str, Any]) -> EpisodeScore:
    failures: list[Failure] = []
    calls = [c for c in trajectory.tool_calls if c.error is None]
    for turn, expected in enumerate(task.gold):
        made = [(c.name, c.arguments) for c in calls if c.turn == turn]
        failures += _turn_failures(turn, expected, made)
    for key, want in (task.data.get("expected_state") or {}).items():
        if state.get(key) != want:
            failures.append(Failure("wrong_state", argument=str(key), expected=want, got=state.get(key)))
    for turn, answer in enumerate(task.answers):
        said = trajectory.responses[turn] if turn < len(trajectory.responses) else ""
        if answer and _norm(answer) not in _norm(said):
            failures.append(Failure("wrong_answer", expected=answer, got=said[:200], turn=turn))
    if trajectory.status == "max_turns":
        failures.append(Failure("non_termination", turn=len(trajectory.responses) - 1))
    expects_calls = any(task.gold)
    delivered = bool(trajectory.tool_calls) or not expects_calls
    passed = delivered and not failures
    checks = sum(len(t) for t in task.gold) + len(task.data.get("expected_state") or {}) + sum(1 for a in task.answers if a)
    score = 1.0 if passed else max(0.0, 1.0 - len(failures) / max(1, checks))
    first = failures[0] if failures else None
    detail = "" if first is None else f"{first.kind}" + (f" {first.tool}" if first.tool else "") + (
        f".{first.argument}" if first.argument else "") + (f" (turn {first.turn})" if first.turn is not None else "")
    return EpisodeScore(passed=passed, score=score if delivered else 0.0, delivered=delivered, detail=detail, failures=tuple(failures))
