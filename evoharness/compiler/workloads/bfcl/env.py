"""A live BFCL multi-turn episode: fresh backend instances, name dispatch, per-turn snapshots.

bfcl-eval's own executor (execute_multi_turn_func_call) eval()s call strings and keeps its
instances in module globals keyed by model name; this module instantiates the same backend
classes per episode and calls their bound methods directly, so episodes can run concurrently.
"""
from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

from evoharness.compiler.runtime.trajectory import ToolCall, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.workloads.bfcl.tools import backend_class, bfcl_tool_catalog, tool_owner, tool_signature

Instances = dict[str, Any]


class ToolNotOfferedError(LookupError):
    """The model called a tool that is unknown or not offered at this point of the episode."""


class ToolArgumentError(TypeError):
    """The arguments do not fit the tool's signature (unexpected or missing names)."""


@dataclass(frozen=True)
class ExecutedCall:
    """One call the environment received, with the result string BFCL's checker would see."""

    turn: int
    name: str
    arguments: Mapping[str, Any]
    result: str  # the tool output, or "Error during execution: {exception}" as bfcl-eval writes it
    error: str | None  # str(exception) when the call raised, else None
    offered: bool  # False when the tool was unknown / not offered (a safety violation)


def format_result(value: Any) -> str:
    """Stringify a tool's return value exactly as bfcl-eval's execute_multi_turn_func_call does."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:  # bfcl-eval falls back to str() on any serialisation failure
            return str(value)
    return str(value)


def error_result(exc: BaseException) -> str:
    return f"Error during execution: {exc}"


def new_instances(
    initial_config: Mapping[str, Any], involved_classes: tuple[str, ...], *, long_context: bool
) -> Instances:
    """Fresh backend instances loaded with the scenario, as bfcl-eval builds them."""
    instances: Instances = {}
    for class_name in involved_classes:
        instance = backend_class(class_name)()
        if class_name not in STATELESS_CLASSES:
            config = copy.deepcopy(dict(initial_config.get(class_name, {})))
            instance._load_scenario(config, long_context=long_context)
        instances[class_name] = instance
    return instances


def task_instances(task: Task) -> Instances:
    return new_instances(
        task.data["initial_config"],
        tuple(task.data["involved_classes"]),
        long_context=bool(task.data.get("long_context", False)),
    )


def check_arguments(name: str, arguments: Mapping[str, Any]) -> None:
    """Raise ToolArgumentError naming the bad argument names and what the tool accepts."""
    params = tool_signature(name).parameters
    required = [p for p, spec in params.items() if spec.default is spec.empty]
    unexpected = sorted(set(arguments) - set(params))
    missing = [p for p in required if p not in arguments]
    if unexpected or missing:
        problems = []
        if unexpected:
            problems.append(f"unexpected argument(s) {unexpected}")
        if missing:
            problems.append(f"missing required argument(s) {missing}")
        accepted = ", ".join(p if p in required else f"{p}=optional" for p in params) or "none"
        raise ToolArgumentError(f"{name}() got {' and '.join(problems)}; it accepts: {accepted}")


def invoke(instances: Instances, name: str, arguments: Mapping[str, Any]) -> str:
    """Call tool ``name`` on its owning instance with keyword arguments; exceptions propagate."""
    owner = tool_owner(name)
    if owner not in instances:
        raise ToolNotOfferedError(
            f"tool {name!r} belongs to {owner}, which is not part of this episode "
            f"(episode classes: {sorted(instances)})"
        )
    check_arguments(name, arguments)
    # Backends keep argument objects in their state (post_tweet stores `mentions`, which mention()
    # later extends); a private copy keeps the caller's data, e.g. a Task's gold, untouched.
    kwargs = copy.deepcopy(dict(arguments))
    return format_result(getattr(instances[owner], name)(**kwargs))


def public_state(instance: Any) -> dict[str, Any]:
    """The attributes BFCL's state checker compares: the public ones."""
    return {key: value for key, value in vars(instance).items() if not key.startswith("_")}


def _jsonable(value: Any) -> Any:
    # json.dumps(default=str) would reject non-string keys and render sets in hash order; this is
    # the same conversion (objects such as Directory trees become their str()) made total.
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(item) for item in value), key=repr)
    return str(value)


class BfclEnvironment:
    """One episode of one BFCL task.

    Seeding: the backends that draw random numbers (MessageAPI, TradingBot, TravelAPI,
    VehicleControlAPI) own a private ``random.Random`` seeded from the scenario's
    ``random_seed`` (or a class default) in ``_load_scenario``; they never touch the global
    ``random`` module. Reset is therefore deterministic for any ``seed``. The episode seed is
    recorded but deliberately not mixed into the backends: BFCL scores the model's state against
    gold instances built with the scenario seed, so re-seeding would make generated ids
    (bookings, messages) differ from gold. Two known non-random clock reads remain in bfcl-eval:
    File._last_modified (private, never compared) and TravelAPI's age check on date of birth.
    """

    def __init__(self, task: Task, *, seed: int = 0) -> None:
        self.task = task
        self.seed = seed
        self._instances = task_instances(task)
        self._turn = 0
        self._calls: list[ExecutedCall] = []
        self._turn_states: dict[int, Instances | bytes] = {}  # bytes: pickled, loaded only when the scorer reads the turn

    @property
    def turn(self) -> int:
        """The current user turn; equals the number of turns ended so far."""
        return self._turn

    @property
    def calls(self) -> tuple[ExecutedCall, ...]:
        return tuple(self._calls)

    def offered_tools(self, turn: int | None = None) -> tuple[str, ...]:
        """Tools the model may call at ``turn`` (default: now): the task's plus those added."""
        at = self._turn if turn is None else turn
        added = [
            name for t in sorted(self.task.added_tools) if t <= at
            for name in self.task.added_tools[t]
        ]
        return tuple(dict.fromkeys([*self.task.tool_names, *added]))

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"{name}() arguments must be a mapping of parameter name to value, "
                f"got {type(arguments).__name__}: {arguments!r}"
            )
        offered = name in self.offered_tools()
        logged = copy.deepcopy(dict(arguments))
        try:
            if self._turn >= len(self.task.turns):
                raise RuntimeError(
                    f"episode {self.task.task_id} has ended (all {len(self.task.turns)} turns "
                    f"were ended); no more tool calls are accepted"
                )
            if not offered:
                raise ToolNotOfferedError(self._not_offered_message(name))
            result = invoke(self._instances, name, arguments)
        except Exception as exc:
            self._calls.append(
                ExecutedCall(self._turn, name, logged, error_result(exc), str(exc), offered)
            )
            raise
        self._calls.append(ExecutedCall(self._turn, name, logged, result, None, True))
        return result

    def _not_offered_message(self, name: str) -> str:
        offered = ", ".join(self.offered_tools())
        if name in bfcl_tool_catalog():
            return f"tool {name!r} is not offered at this point of the episode; offered: {offered}"
        return f"unknown tool {name!r}; offered tools: {offered}"

    def end_turn(self, turn: int) -> None:
        """Snapshot the state that BFCL scores for ``turn`` and move on to the next turn."""
        if turn != self._turn:
            raise ValueError(
                f"end_turn({turn}) but the episode is at turn {self._turn}; call end_turn once "
                f"per user turn, in order 0..{len(self.task.turns) - 1}"
            )
        try:  # half a copy now, the other half only if the turn is scored (a warm replay never is)
            self._turn_states[turn] = pickle.dumps(self._instances, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            self._turn_states[turn] = copy.deepcopy(self._instances)
        self._turn += 1

    def instances_after(self, turn: int) -> Mapping[str, Any]:
        """Backend instances as they were at the end of ``turn`` (live, if not ended yet)."""
        state = self._turn_states.get(turn, self._instances)
        if isinstance(state, bytes):
            state = self._turn_states[turn] = pickle.loads(state)
        return state

    def snapshot(self) -> Mapping[str, Any]:
        return {
            class_name: _jsonable(public_state(instance))
            for class_name, instance in self._instances.items()
        }


def play(
    task: Task, calls_per_turn: Sequence[Sequence[ToolCall]], *, seed: int = 0
) -> tuple[BfclEnvironment, Trajectory]:
    """Run a scripted policy (e.g. the gold calls) through a fresh environment.

    Turns beyond ``calls_per_turn`` are not played, as when an episode stops early.
    """
    env = BfclEnvironment(task, seed=seed)
    records: list[ToolCallRecord] = []
    for turn, calls in enumerate(calls_per_turn[: len(task.turns)]):
        for call in calls:
            try:
                result: str | None = env.call(call.name, call.arguments)
                error = None
            except Exception as exc:
                result, error = None, str(exc)
            records.append(ToolCallRecord(turn, call.name, dict(call.arguments), result, error))
        env.end_turn(turn)
    played = min(len(calls_per_turn), len(task.turns))
    trajectory = Trajectory(
        task_id=task.task_id, sample=0, seed=seed, variant_hash="scripted", status="completed",
        tool_calls=tuple(records), responses=("",) * played, final_state=env.snapshot(),
    )
    return env, trajectory
