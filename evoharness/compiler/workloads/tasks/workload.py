"""``workload=tasks``: tasks from a JSONL or YAML file, tools from Python functions.

A task record (one JSON object per line, or a YAML list of them)::

    {"id": "refund_1",                       # plain name, unique
     "turns": ["Refund order 17.", ["Thanks.", "Also close it."]],  # a user message or messages per turn
     "state": {"orders": {"17": {"status": "paid"}}},               # the environment's initial state
     "expected_calls": [[{"name": "refund", "arguments": {"order_id": 17}}], []],  # per turn, optional
     "expected_state": {"orders": {"17": {"status": "refunded"}}},  # keys checked at the end, optional
     "answers": [null, "Closed."],            # reference final answer per turn, optional ("answer": last turn)
     "split": "train",                        # optional: otherwise hashed from the cluster by `splits` shares
     "stratum": "refunds",                    # optional label the split records show
     "cluster": "refund_flow"}                # optional: tasks that are variants of one case name the same one

A task's cluster (``Task.cluster``) is ``"tasks/<cluster>"``, or its own id when it names none, so a
variant can join another task's cluster by naming that task's id. Tasks of one cluster are one
piece of evidence to the claim statistics and share a split: a task without ``split`` is assigned
by a seeded hash of its cluster's name (its id when it names none), and a cluster whose tasks'
splits differ (one declared, one hashed, say) is refused.

The tool functions (``tools``: import paths, the same list as ``tool.callables``) get the task's
state, deep-copied per episode, through a ``state`` parameter. The default scorer passes an
episode when every check the task gives holds: its expected calls were made (per turn, argument
for argument), its expected state keys match, and each reference answer appears in that turn's
final answer (case and spacing aside). Failures are structured records. ``scorer``, an import
path, replaces it: ``fn(task, trajectory, state) -> EpisodeScore | bool | float``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from evoharness.compiler.callables import call, callable_tools, import_target, is_live
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import is_name
from evoharness.compiler.runtime.tool_outputs import ToolOutputs
from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.runtime.workload import SPLITS, EpisodeScore, Split, Task, checked_split
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.workloads.tasks.scoring import score_episode

RECORD = {
    "type": "object",
    "required": ["id", "turns"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "turns": {"type": "array", "minItems": 1,
                  "items": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}},
        "state": {"type": "object"},
        "expected_calls": {"type": "array", "items": {"type": "array", "items": {
            "type": "object", "required": ["name"], "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}}}},
        "expected_state": {"type": "object"},
        "answer": {"type": "string"},
        "answers": {"type": "array", "items": {"type": ["string", "null"]}},
        "split": {"enum": list(SPLITS)},
        "stratum": {"type": "string"},
        "cluster": {"type": "string", "minLength": 1},
        "tools": {"type": "array", "items": {"type": "string"}},
    },
}


def _read(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" line {mark.line + 1}" if mark is not None else ""
            raise ValueError(f"{path}{at}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
        except RecursionError:
            raise ValueError(f"{path}: nested deeper than a tasks file can be read; flatten the records") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: a YAML tasks file holds a list of task records")
        return data
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {n}: not JSON ({exc.msg})") from None
            except RecursionError:
                raise ValueError(f"{path} line {n}: nested deeper than a tasks file can be read; flatten the record") from None
    return records


class Environment:
    """The task's state, and its tools dispatched by name to their functions; a live tool's output
    is recorded into, or replayed from, the snapshot when one is configured."""

    def __init__(self, functions: Mapping[str, Callable[..., Any]], state: Mapping[str, Any],
                 outputs: ToolOutputs | None = None) -> None:
        self.functions, self.state, self.turn, self.outputs = functions, copy.deepcopy(dict(state)), 0, outputs

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name not in self.functions:
            raise KeyError(f"no tool named {name!r}")
        fn = self.functions[name]
        lens = self.outputs if self.outputs is not None and self.outputs.mode != "live" and is_live(fn) else None
        if lens is not None and lens.mode == "replay":
            return lens.get(name, arguments)
        result = call(fn, arguments, self.state)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if lens is not None:
            lens.put(name, arguments, text)
        return text

    def end_turn(self, turn: int) -> None:
        self.turn = turn + 1

    def snapshot(self) -> Mapping[str, Any]:
        return json.loads(json.dumps(self.state, default=str))


class TasksFileWorkload:
    """Tasks from ``path``, tools from ``tools``. The commands hand over an absolute path: a relative
    one in a config file is anchored to that file's folder first (``configpath.anchored_options``);
    built directly, a relative path is read from the working directory."""

    name = "tasks"

    def __init__(self, *, path: str, tools: Sequence[str] = (), scorer: str | None = None,
                 splits: Mapping[str, float] | None = None, salt: str = "tasks-v1",
                 tool_outputs: Mapping[str, Any] | None = None) -> None:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(f"workload.options.path: no tasks file at {file.absolute()}")
        shares = dict(splits or {"train": 0.6, "dev": 0.2, "holdout": 0.2})
        if set(shares) != set(SPLITS) or any(not 0 <= float(v) <= 1 for v in shares.values()) or abs(sum(shares.values()) - 1) > 1e-9:
            raise ValueError(f"workload.options.splits: give train, dev and holdout shares that sum to 1, got {shares}")
        self._tools = callable_tools(list(tools))
        lens = dict(tool_outputs or {})
        unknown = sorted(set(lens) - {"path", "mode", "on_miss"})
        if unknown or (lens and not lens.get("path")):
            raise ValueError(f"workload.options.tool_outputs: give path (and mode: live|record|replay, on_miss: error|skip); "
                             f"got {sorted(lens)}")
        self.outputs = ToolOutputs(lens["path"], mode=str(lens.get("mode", "replay")), on_miss=str(lens.get("on_miss", "error"))) \
            if lens and lens.get("mode", "replay") != "live" else None
        self._scorer = import_target("workload.options.scorer", scorer) if scorer else None
        self._tasks: dict[str, Task] = {}
        for i, raw in enumerate(_read(file)):
            task = self._task(raw, f"{file} record {i + 1}", shares, salt)
            if task.task_id in self._tasks:
                raise ValueError(f"{file} record {i + 1}: task id {raw['id']!r} appears twice")
            self._tasks[task.task_id] = task
        _check_cluster_splits(self._tasks.values(), file)

    def _task(self, raw: Any, where: str, shares: Mapping[str, float], salt: str) -> Task:
        try:
            jsonschema.validate(raw, RECORD)
        except jsonschema.ValidationError as exc:
            at = "/".join(str(p) for p in exc.absolute_path) or "the record"
            raise ValueError(f"{where}: {at}: {exc.message}") from None
        if not is_name(raw["id"]):
            raise ValueError(f"{where}: id {raw['id']!r} is not a plain name (letters, digits, _ . -)")
        turns = tuple(tuple({"role": "user", "content": m} for m in ([t] if isinstance(t, str) else t)) for t in raw["turns"])
        expected = raw.get("expected_calls") or []
        if len(expected) > len(turns):
            raise ValueError(f"{where}: expected_calls has {len(expected)} turns, the task {len(turns)}")
        gold = tuple(tuple(ToolCall(c["name"], dict(c.get("arguments") or {})) for c in turn) for turn in expected)
        unknown = sorted({c.name for turn in gold for c in turn} - set(self._tools))
        if unknown:
            raise ValueError(f"{where}: expected_calls name tools that are not in workload.options.tools: {unknown}")
        answers = tuple(raw.get("answers") or ([None] * (len(turns) - 1) + [raw["answer"]] if "answer" in raw else []))
        if len(answers) > len(turns):
            raise ValueError(f"{where}: answers has {len(answers)} entries, the task {len(turns)} turns")
        if any(a is not None and not str(a).strip() for a in answers):
            raise ValueError(f"{where}: an empty reference answer checks nothing; write null for a turn without one")
        unoffered = sorted(set(raw.get("tools") or []) - set(self._tools))
        if unoffered:
            raise ValueError(f"{where}: tools names tools that are not in workload.options.tools: {unoffered}")
        split: Split = raw.get("split") or _hashed_split(raw.get("cluster", raw["id"]), shares, salt)
        offered = tuple(raw.get("tools") or self._tools)
        return Task(task_id=f"{self.name}/{raw['id']}", split=split, turns=turns, tool_names=offered,
                    gold=gold + ((),) * (len(turns) - len(gold)) if gold else (), answers=answers,
                    data={"state": raw.get("state") or {}, "expected_state": raw.get("expected_state"),
                          "stratum": raw.get("stratum", "-")},
                    cluster=f"{self.name}/{raw['cluster']}" if "cluster" in raw else "")

    @property
    def scorer_modules(self) -> tuple[str, ...]:
        """The modules of the tool functions and of a custom scorer: what judges an episode is in the scorer hash."""
        fns = [fn for _, fn in self._tools.values()] + ([self._scorer] if self._scorer is not None else [])
        return tuple(dict.fromkeys(str(fn.__module__) for fn in fns))

    def tool_specs(self) -> Sequence[ToolSpec]:
        return [spec for spec, _ in self._tools.values()]

    def tasks(self, split: str) -> Sequence[Task]:
        wanted = checked_split(split)
        return [t for t in self._tasks.values() if t.split == wanted]

    def task(self, task_id: str) -> Task:
        if task_id not in self._tasks:
            raise KeyError(f"unknown task {task_id!r} in workload {self.name!r}")
        return self._tasks[task_id]

    def make_environment(self, task: Task, *, seed: int) -> Environment:
        return Environment({n: fn for n, (_, fn) in self._tools.items()}, task.data.get("state") or {}, self.outputs)

    @property
    def live_tools(self) -> tuple[str, ...]:
        """The tools labelled live that call their service as configured (no snapshot, or one being recorded)."""
        if self.outputs is not None and self.outputs.mode == "replay":
            return ()
        return tuple(name for name, (_, fn) in self._tools.items() if is_live(fn))

    @property
    def tool_outputs_hash(self) -> str | None:
        """The replayed snapshot's content hash (None unless replaying): part of the search's freeze."""
        return self.outputs.content_hash() if self.outputs is not None and self.outputs.mode == "replay" else None

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore:
        if self._scorer is not None:
            where = f"{self._scorer.__module__}.{getattr(self._scorer, '__qualname__', '?')}"
            try:
                out = self._scorer(task, trajectory, environment.snapshot())
            except Exception as exc:  # the scorer's bug, not the model's failure: stop with one line
                raise ConfigError("workload.options.scorer", f"{where} raised {type(exc).__name__}: {exc} on {task.task_id}",
                                  "fix the scorer; it is called as scorer(task, trajectory, state)") from None
            if isinstance(out, EpisodeScore):
                return out
            value = float(out) if isinstance(out, (bool, int, float)) else float("nan")
            if not math.isfinite(value):
                raise ConfigError("workload.options.scorer", f"{where} returned {out!r} on {task.task_id}",
                                  "return an EpisodeScore, a bool or a number in [0, 1]")
            return EpisodeScore(passed=value >= 1.0, score=max(0.0, min(1.0, value)),
                                detail="" if value >= 1.0 else f"{where} scored {value:g}")
        return score_episode(task, trajectory, environment.snapshot())


_BUILT: list[TasksFileWorkload] = []  # the last one this process built


def tasks_workload(**options: Any) -> TasksFileWorkload:
    """The registered factory. Built with no options, as the simulated model builds a workload to
    look a task id up, it is the one this process last built from a file: the simulator serves a
    tasks-file workload in the process that evaluates it (its in-process route), not over HTTP."""
    if not options:
        if not _BUILT:
            raise ValueError("workload.options.path is not set: point it at a .jsonl or .yaml tasks file")
        return _BUILT[-1]
    built = TasksFileWorkload(**options)
    _BUILT[:] = [built]
    return built


def _check_cluster_splits(tasks: Iterable[Task], file: Path) -> None:
    """Refuse a cluster whose tasks were declared into different splits (its holdout tasks would
    share evidence with the ones the search fits on)."""
    seen: dict[str, Task] = {}
    for task in tasks:
        first = seen.setdefault(task.cluster, task)
        if first.split != task.split:
            raise ValueError(f"{file}: cluster {task.cluster.split('/', 1)[1]!r} spans two splits ({first.task_id} in "
                             f"{first.split}, {task.task_id} in {task.split}); declare the same split on all its tasks, or on none")


def _hashed_split(key: str, shares: Mapping[str, float], salt: str) -> Split:
    """A stable split from ``key`` (a cluster's name, or the task's id) alone: adding tasks never moves an old one."""
    at = int(hashlib.sha256(f"{salt}:{key}".encode()).hexdigest()[:12], 16) / 16**12
    cumulative = 0.0
    for split in SPLITS:
        cumulative += float(shares[split])
        if at < cumulative:
            return split
    return SPLITS[-1]
