"""ToolTalk conversations as an evoharness workload.

ToolTalk fixes the user's turns. Each assistant turn carries the reference API calls with their
responses. Here every user turn is a turn of the episode, and its reference calls are that turn's
gold. The environment is ToolTalk's own ``ToolExecutor`` on its JSON databases, with the
conversation's clock and signed-in user. The scorer is ToolTalk's own matcher
(``evaluate_predictions``):
- an episode passes when every reference call was matched and no action went wrong;
- the score is ToolTalk's soft success;
- each action that succeeded but matches no reference call is a safety violation (ToolTalk's
  incorrect-action rate).

A task is one whole conversation, and no two conversations are variants of one another (two pairs
share a mix of APIs, each with its own user, scenario and clock), so each task is a cluster of its
own: ``Task.cluster`` is left to its default, the task id.
"""
from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from evoharness.plugin import EpisodeScore, Failure, Task, ToolCall, ToolSpec, Trajectory, register_tool_catalog, register_workload
from evoharness_tooltalk import textmatch

textmatch.install()  # before ToolTalk's APIs are imported (see textmatch.py)
SPLITS = (("train", 0.5), ("dev", 0.25), ("holdout", 0.25))
SUBSETS = ("tooltalk", "easy")
_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "array": "array", "object": "object"}


def _data() -> Path:
    return Path(str(resources.files("tooltalk"))) / "data"


def _suite_of(api: Any) -> str:
    return api.__module__.rsplit(".", 1)[-1]


def tooltalk_tool_specs() -> list[ToolSpec]:
    """Every ToolTalk API as a tool: its docs as the schema (the session token is the executor's)."""
    from tooltalk.apis import ALL_APIS

    specs = []
    for api in ALL_APIS:
        props = {name: {"type": _TYPES.get(str(a["type"]), "string"), "description": str(a["description"])}
                 for name, a in api.parameters.items() if name != "session_token"}
        required = [name for name, a in api.parameters.items() if a.get("required") and name != "session_token"]
        specs.append(ToolSpec(name=api.__name__, description=str(api.description),
                              parameters={"type": "object", "properties": props, "required": required},
                              mutates_state=bool(api.is_action), group=_suite_of(api)))
    return specs


register_tool_catalog("tooltalk")(tooltalk_tool_specs)


class Environment:
    """ToolTalk's executor, set up as its own evaluation sets up a conversation."""

    def __init__(self, conversation: Mapping[str, Any]) -> None:
        from tooltalk.evaluation.tool_executor import ToolExecutor

        self.executor = ToolExecutor(init_database_dir=str(_data() / "databases"))
        self.executor.init_conversation_state(conversation["metadata"], [], conversation.get("user") or {})
        self.calls: list[dict[str, Any]] = []  # every request and response, for ToolTalk's matcher
        self.turn = 0

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        request, response = self.executor.execute_tool(name, dict(arguments))
        self.calls.append({"turn": self.turn, "role": "api", "request": copy.deepcopy(request),
                           "response": response["response"], "exception": response["exception"]})
        if response["exception"] is not None:
            raise RuntimeError(str(response["exception"]))
        return json.dumps(response["response"], default=str)

    def end_turn(self, turn: int) -> None:
        self.turn = turn + 1

    def snapshot(self) -> Mapping[str, Any]:
        return json.loads(json.dumps(self.executor.databases, default=str))


def _split(name: str) -> str:
    at = int(hashlib.sha256(f"tooltalk-v1:{name}".encode()).hexdigest()[:12], 16) / 16**12
    cumulative = 0.0
    for split, share in SPLITS:
        cumulative += share
        if at < cumulative:
            return split
    return SPLITS[-1][0]


@register_workload("tooltalk")
class ToolTalkWorkload:
    name = "tooltalk"
    packages = ("nvidia-tooltalk",)
    scorer_modules = ("tooltalk.evaluation", "tooltalk.apis", "evoharness_tooltalk.textmatch")
    scorer_settings = {"text_match": textmatch.TEXT_MATCH}  # in the scorer hash: which free-text comparison judged

    def __init__(self, *, subsets: Sequence[str] = SUBSETS) -> None:
        if isinstance(subsets, str):
            raise ValueError(f"subsets must be a list, e.g. [{subsets}], not the string {subsets!r}")
        bad = [s for s in subsets if s not in SUBSETS]
        if bad or not subsets:
            raise ValueError(f"subsets: {list(subsets)} is not a subset of {list(SUBSETS)}")
        self._specs = tooltalk_tool_specs()
        self._conversations: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, Task] = {}
        for subset in SUBSETS:  # every subset's tasks resolve, so a workload built without options finds any id
            for path in sorted((_data() / subset).glob("*.json")):
                conv = json.loads(path.read_text(encoding="utf-8"))
                task_id = f"tooltalk/{subset}/{path.stem}"
                self._conversations[task_id] = conv
                self._tasks[task_id] = self._task(task_id, conv)
        self._listed = [t for t in self._tasks if t.split("/")[1] in subsets]

    def _task(self, task_id: str, conv: Mapping[str, Any]) -> Task:
        turns: list[tuple[dict[str, str], ...]] = []
        gold: list[tuple[ToolCall, ...]] = []
        for entry in conv["conversation"]:
            if entry["role"] == "user":
                turns.append(({"role": "user", "content": str(entry["text"])},))
                gold.append(())
            elif turns:
                calls = tuple(ToolCall(a["request"]["api_name"], {k: v for k, v in a["request"]["parameters"].items()
                                                                  if k != "session_token"}) for a in entry.get("apis") or [])
                gold[-1] = gold[-1] + calls
        return Task(task_id=task_id, split=_split(task_id), turns=tuple(turns), tool_names=tuple(s.name for s in self._specs),
                    gold=tuple(gold), data={"stratum": "+".join(sorted(conv.get("suites_used") or []))})

    def tool_specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def tasks(self, split: str) -> Sequence[Task]:
        if split not in dict(SPLITS):
            raise ValueError(f"unknown split {split!r}; use one of {[s for s, _ in SPLITS]}")
        return [self._tasks[t] for t in self._listed if self._tasks[t].split == split]

    def task(self, task_id: str) -> Task:
        if task_id not in self._tasks:
            raise KeyError(f"unknown ToolTalk task {task_id!r}")
        return self._tasks[task_id]

    def make_environment(self, task: Task, *, seed: int) -> Environment:
        return Environment(self._conversations[task.task_id])

    def score(self, task: Task, trajectory: Trajectory, environment: Environment) -> EpisodeScore:
        from tooltalk.evaluation.tool_executor import ToolExecutor

        conv = copy.deepcopy(self._conversations[task.task_id])
        # ToolTalk's matcher reads the predictions off the assistant turns: put ours on the first one
        assistant = next(t for t in conv["conversation"] if t["role"] == "assistant")
        assistant["predictions"] = [dict(c) for c in environment.calls]
        judge = ToolExecutor(init_database_dir=str(_data() / "databases"))
        metrics = judge.evaluate_predictions(conv)["metrics"]
        truths = [a for t in conv["conversation"] if t["role"] == "assistant" for a in t.get("apis") or []]
        failures = _failures(truths, assistant["predictions"], trajectory)
        passed = bool(metrics["success"])
        return EpisodeScore(passed=passed, score=float(metrics["soft_success"]),
                            named={"recall": float(metrics["recall"]), "precision": float(metrics["precision"]),
                                   "bad_action_rate": float(metrics["bad_action_rate"])},
                            safety_violations=int(metrics["bad_actions"]), delivered=bool(environment.calls) or not truths,
                            detail="" if passed else f"ToolTalk: recall {metrics['recall']:.2f}, {metrics['bad_actions']} bad action(s)",
                            failures=tuple(failures))


def _failures(truths: Sequence[Mapping[str, Any]], predictions: Sequence[Mapping[str, Any]], trajectory: Trajectory) -> list[Failure]:
    """ToolTalk's verdicts as structured records: an unmatched reference call is a wrong value of
    the argument that differs (when the API was called) or a missed call; a bad action is an
    unneeded call."""
    out: list[Failure] = []
    for truth in truths:
        if truth.get("match"):
            continue
        name = truth["request"]["api_name"]
        tried = [p for p in predictions if p["request"]["api_name"] == name]
        if not tried:
            out.append(Failure("missed_call", tool=name))
            continue
        want, got = truth["request"]["parameters"], tried[-1]["request"]["parameters"]
        diff = [k for k in want if k != "session_token" and got.get(k) != want[k]]
        if diff:
            out += [Failure("wrong_value", tool=name, argument=k, expected=want[k], got=got.get(k)) for k in diff]
        else:
            out.append(Failure("no_recovery", tool=name, got=tried[-1].get("exception")))
    out += [Failure("unneeded_call", tool=p["request"]["api_name"], turn=p.get("turn")) for p in predictions if p.get("bad_action")]
    if trajectory.status == "max_turns":
        out.append(Failure("non_termination"))
    return out
