"""Score a BFCL multi-turn episode with bfcl-eval's own per-turn comparisons.

The verdict reproduces bfcl-eval's multi_turn_irrelevance_checker + multi_turn_checker without
calling multi_turn_checker (it eval()s call strings and caches instances in module globals):
gold calls are dispatched by name with ast-parsed keyword arguments on fresh instances, and the
state and response comparisons are bfcl-eval's state_checker and response_checker.

Source of the model's calls: the environment's own log (BfclEnvironment.calls) and its end-of-
turn snapshots. That is what actually ran against the backends, with the raw exception of each
failed call, so state and results need no re-execution and cannot drift from what the model saw;
calls the harness rejected before they reached the environment had no effect and are not
counted. When the environment is not this task's BfclEnvironment (e.g. re-scoring a stored
trajectory), the trajectory's tool calls are replayed into a fresh one instead; that replay
cannot tell calls the harness rejected (say, to a tool the variant detached but the task offers)
from calls the environment ran, so pass the live environment for exact scores.

Score: the fraction of turns that are valid before the first invalid one (BFCL stops at the first
failure, and later turns build on a diverged state), so score == 1.0 exactly when passed.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
    response_checker,
    state_checker,
)

from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.runtime.workload import Environment, EpisodeScore, Failure, Task
from evoharness.compiler.workloads.bfcl.env import (
    BfclEnvironment,
    ExecutedCall,
    error_result,
    invoke,
    task_instances,
)
from evoharness.compiler.workloads.bfcl.tools import bfcl_tool_catalog, render_call

_DETAIL_CHARS = 300


@dataclass(frozen=True)
class TurnVerdict:
    turn: int
    valid: bool
    error_type: str = ""
    message: str = ""
    state_ok: bool | None = None  # None: not checked (gold turn empty or turn not played)
    response_ok: bool | None = None


def episode_environment(task: Task, trajectory: Trajectory, environment: Environment) -> BfclEnvironment:
    """The environment to score from: the live one, or a replay of the trajectory's calls."""
    if isinstance(environment, BfclEnvironment) and environment.task.task_id == task.task_id:
        return environment
    replay = BfclEnvironment(task, seed=trajectory.seed)
    played = max([len(trajectory.responses), *(c.turn + 1 for c in trajectory.tool_calls)])
    for turn in range(min(played, len(task.turns))):
        for record in trajectory.calls_in_turn(turn):
            try:
                replay.call(record.name, record.arguments)
            except Exception:  # logged by the environment, exactly as in a live episode
                pass
        replay.end_turn(turn)
    return replay


def _gap(gold: Sequence[ToolCall], model: Sequence[ExecutedCall]) -> str:
    """Name the tool (and argument) behind a failed turn: a missed gold call, a wrong or
    missing argument, a failed call, or an extra state-changing call."""
    for call in gold:
        same = [m for m in model if m.name == call.name]
        if not same:
            return f"missing call {render_call(call)}"
        exact = [m for m in same if dict(m.arguments) == dict(call.arguments)]
        if exact and all(m.error is not None for m in exact):
            return f"{render_call(call)} failed: {_short(exact[0].error, 120)}"
        if exact:
            continue
        last = same[-1]  # after retries, the model's final attempt is the one to compare
        for key in [*call.arguments, *(k for k in last.arguments if k not in call.arguments)]:
            got, want = last.arguments.get(key, "<missing>"), call.arguments.get(key, "<missing>")
            if got != want:
                failed = f" (call failed: {_short(last.error, 100)})" if last.error else ""
                return f"{call.name}.{key}: model={_short(got)} gold={_short(want)}{failed}"
    unmatched = [(c.name, dict(c.arguments)) for c in gold]
    catalog = bfcl_tool_catalog()
    for m in model:
        signature = (m.name, dict(m.arguments))
        if signature in unmatched:
            unmatched.remove(signature)
            continue
        spec = catalog.get(m.name)
        if m.error is None and (spec is None or spec.mutates_state):
            return f"unexpected call {render_call(ToolCall(m.name, m.arguments))}"
    return ""


def _seen(value: Any, results: Sequence[str]) -> bool:
    # a value the model could have copied: long enough to be a value, a whole token, not a coincidence
    text = str(value)
    pattern = re.compile(rf"(?<![\w]){re.escape(text)}(?![\w])")
    return len(text) >= 3 and any(pattern.search(r) for r in results)


def turn_failures(task: Task, env: BfclEnvironment, turn: int, *, status: str) -> list[Failure]:
    """What went wrong in ``turn`` (the first invalid one: where the reward was lost), as
    structured records, plus the episode's calls to tools it did not offer, and non-termination."""
    catalog = bfcl_tool_catalog()
    out: list[Failure] = []
    for c in env.calls:
        if not c.offered:
            out.append(Failure("unknown_tool" if c.name not in catalog else "forbidden_tool", c.name, turn=c.turn))
    if turn > env.turn or turn >= len(task.gold):  # never played
        return [*out, Failure("non_termination", turn=turn)] if status == "max_turns" else out
    gold = task.gold[turn]
    model = [c for c in env.calls if c.turn == turn and c.offered]
    results = [c.result for c in env.calls if c.turn < turn]  # what the model had seen when the turn began
    if not gold:
        if model:
            out.append(Failure("unneeded_call", model[0].name, turn=turn))
        return out
    gold_names = {g.name for g in gold}
    strays = [m.name for m in model if m.name not in gold_names]
    missing: list[int] = []
    consumed: list[str] = []  # strays already reported as the wrong tool
    used: set[int] = set()  # model calls paired with a gold call
    unpaired: list[int] = []
    for j, call in enumerate(gold):  # exact matches first, so a retry or a repeated tool pairs right
        exact = [i for i, m in enumerate(model) if i not in used and m.name == call.name and dict(m.arguments) == dict(call.arguments)]
        ok = [i for i in exact if model[i].error is None]
        if ok:
            used.add(ok[0])
        elif exact:
            used.update(exact)
            out.append(Failure("no_recovery", call.name, got=_short(model[exact[-1]].error, 120), turn=turn))
        else:
            unpaired.append(j)
    for j in unpaired:
        call = gold[j]
        rest = [i for i, m in enumerate(model) if i not in used and m.name == call.name]
        if not rest:
            missing.append(j)
            continue
        used.add(rest[-1])
        last = model[rest[-1]]  # after retries, the model's final attempt is the one to compare
        for key in [*call.arguments, *(k for k in last.arguments if k not in call.arguments)]:
            if key not in last.arguments:
                out.append(Failure("missing_argument", call.name, key, expected=call.arguments[key], turn=turn))
            elif key not in call.arguments:
                out.append(Failure("extra_argument", call.name, key, got=last.arguments[key], turn=turn))
            elif last.arguments[key] != call.arguments[key]:
                want = call.arguments[key]
                kind = "propagation" if _seen(want, results) else "wrong_value"
                out.append(Failure(kind, call.name, key, expected=want, got=last.arguments[key], turn=turn))
        if last.error is not None:
            out.append(Failure("no_recovery", call.name, got=_short(last.error, 120), turn=turn))
    for j in missing:
        name = gold[j].name
        if strays:
            consumed.append(strays.pop(0))
            out.append(Failure("wrong_tool", name, got=consumed[-1], turn=turn))
        elif model and all(i in missing for i in range(j, len(gold))):
            out.append(Failure("premature_stop", name, turn=turn))
            break  # one stop, named by the first call it skipped
        else:
            out.append(Failure("missed_call", name, turn=turn))
    for i, m in enumerate(model):  # a write no gold call asked for (paired calls and the wrong tool's are accounted for)
        spec = catalog.get(m.name)
        if i in used or m.error is not None or m.name in gold_names or not (spec is None or spec.mutates_state):
            continue
        if m.name in consumed:
            consumed.remove(m.name)
            continue
        out.append(Failure("unneeded_call", m.name, turn=turn))
    if status == "max_turns":
        out.append(Failure("non_termination", turn=turn))
    return out


def _join(*parts: str) -> str:
    # The call-level gap goes first: it names the tool and argument, which is what a rule miner
    # needs, and the detail is truncated from the end.
    return "; ".join(part for part in parts if part)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _judge_turns(task: Task, env: BfclEnvironment) -> list[TurnVerdict]:
    gold_instances = task_instances(task)
    model_results: list[str] = []
    verdicts: list[TurnVerdict] = []
    for turn, gold_calls in enumerate(task.gold):
        model_calls = [c for c in env.calls if c.turn == turn]
        model_results.extend(c.result for c in model_calls)
        gold_results = []
        for call in gold_calls:
            try:
                gold_results.append(invoke(gold_instances, call.name, call.arguments))
            except Exception as exc:
                gold_results.append(error_result(exc))
        if turn > env.turn:
            # The episode stopped before this turn (bfcl-eval: force-terminated).
            verdicts.append(TurnVerdict(turn, False, "multi_turn:force_terminated",
                                        "the episode ended before this turn was played"))
            continue
        if not gold_calls:
            if model_calls:
                first = render_call(ToolCall(model_calls[0].name, model_calls[0].arguments))
                verdicts.append(TurnVerdict(
                    turn, False, "multi_turn:irrelevance_error",
                    f"gold expects no call (a needed tool or argument is missing; ask the user) "
                    f"but the model made {len(model_calls)}, first {first}"))
            else:
                verdicts.append(TurnVerdict(turn, True))
            continue
        diffs = _state_differences(env.instances_after(turn), gold_instances)
        response = response_checker(model_results, gold_results, turn)
        state_ok, response_ok = not diffs, bool(response["valid"])
        gap = _gap(gold_calls, model_calls)
        if not model_calls:
            verdicts.append(TurnVerdict(
                turn, False, "multi_turn:empty_turn_model_response",
                f"no tool call; gold: {', '.join(render_call(c) for c in gold_calls)}",
                state_ok, response_ok))
        elif not state_ok:
            verdicts.append(TurnVerdict(turn, False, "multi_turn:instance_state_mismatch",
                                        _join(gap, f"state differs in {', '.join(diffs)}"),
                                        state_ok, response_ok))
        elif not response_ok:
            missing = "; ".join(_short(item) for item in response["details"]["missing_items"])
            verdicts.append(TurnVerdict(turn, False, "multi_turn:execution_response_mismatch",
                                        _join(gap, f"missing gold result(s) {missing}"),
                                        state_ok, response_ok))
        else:
            verdicts.append(TurnVerdict(turn, True, state_ok=True, response_ok=True))
    return verdicts


def _state_differences(model: Mapping[str, Any], gold: Mapping[str, Any]) -> list[str]:
    """``Class.attribute`` for every public attribute that differs, via bfcl's state_checker.

    state_checker stops at the first differing class, so it is asked one class at a time.
    """
    diffs: list[str] = []
    for class_name, gold_instance in gold.items():
        result = state_checker({class_name: model[class_name]}, {class_name: gold_instance})
        if not result["valid"]:
            attrs = sorted(result["details"]["differences"]) or ["<instance>"]
            diffs.extend(f"{class_name}.{attr}" for attr in attrs)
    return diffs


def _fraction(flags: Sequence[bool | None]) -> float:
    checked = [flag for flag in flags if flag is not None]
    return sum(checked) / len(checked) if checked else 1.0


def score_episode(task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore:
    env = episode_environment(task, trajectory, environment)
    verdicts = _judge_turns(task, env)
    n_turns = len(verdicts)
    first_bad = next((v for v in verdicts if not v.valid), None)
    prefix = (first_bad.turn if first_bad else n_turns) / n_turns if n_turns else 1.0
    in_episode = [c for c in env.calls if c.turn < n_turns]
    gold_has_calls = any(task.gold)
    irrelevance_turns = [v.valid for v, gold in zip(verdicts, task.gold) if not gold]
    detail = ""
    failures: list[Failure] = []
    if first_bad is not None:
        detail = f"turn {first_bad.turn}: {first_bad.error_type}: {first_bad.message}"
        detail = " ".join(detail.split())[:_DETAIL_CHARS]
        failures = turn_failures(task, env, first_bad.turn, status=trajectory.status)
    return EpisodeScore(
        passed=first_bad is None,
        score=prefix,
        named={
            "turn_accuracy": prefix,
            "turns_valid": _fraction([v.valid for v in verdicts]),
            "state": _fraction([v.state_ok for v in verdicts]),
            "response": _fraction([v.response_ok for v in verdicts]),
            "irrelevance": _fraction(irrelevance_turns),
        },
        # Calls to tools the episode did not offer (unknown, excluded, or not yet added).
        safety_violations=sum(1 for c in env.calls if not c.offered),
        delivered=bool(in_episode) or not gold_has_calls,
        detail=detail,
        failures=tuple(failures),
    )
