"""Hostile model output is a scored model mistake: bad JSON, wrong types, unknown or dunder tools,
recursion bombs and megabyte arguments each go back to the model as a clipped error, never reach the
backend, never crash the episode and are never skipped as an infrastructure failure."""
from __future__ import annotations

import json
from typing import Any

import pytest

from evoharness.compiler.runtime.arguments import MAX_ARGUMENT_CHARS, MAX_ECHO_CHARS
from tests.compiler.runtime.scripted_model import SCRIPTS
from tests.compiler.runtime.test_runtime import FileEnv, provider, run, variant  # noqa: F401  (provider: autouse fixture)

BOMB = "[" * 100_000 + "]" * 100_000
HUGE = "x" * (2 * MAX_ARGUMENT_CHARS)


def once(call: dict[str, Any] | str) -> Any:
    """A script that makes one hostile call per user turn, then answers."""
    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] in ("tool",) or str(messages[-1].get("content", "")).startswith("<"):
            return {"content": "Done."}
        return {"content": call} if isinstance(call, str) else {"tool_calls": [call]}
    return script


NATIVE = [
    ("bad_json", {"name": "mv", "arguments": "{source: report.pdf"}, "are not valid JSON"),
    ("not_object", {"name": "mv", "arguments": "[1, 2]"}, "must be a JSON object"),
    ("bomb", {"name": "mv", "arguments": BOMB}, "limit is"),
    ("deep", {"name": "mv", "arguments": "{\"a\": " + "[" * 5000 + "]" * 5000 + "}"}, "nested too deeply"),
    ("wrong_type", {"name": "tail", "arguments": json.dumps({"file_name": "log.txt", "lines": "two"})}, "do not match its parameters"),
    ("missing", {"name": "mv", "arguments": json.dumps({"source": "report.pdf"})}, "'destination' is a required property"),
    ("unknown", {"name": "rm", "arguments": "{}"}, "unknown tool 'rm'"),
    ("dunder", {"name": "__class__", "arguments": "{}"}, "unknown tool '__class__'"),
    ("huge", {"name": "mv", "arguments": json.dumps({"source": HUGE, "destination": "archive"})}, "limit is"),
]


@pytest.mark.parametrize("label, call, expected", NATIVE, ids=[n[0] for n in NATIVE])
def test_hostile_native_calls_are_scored_mistakes(label: str, call: dict[str, Any], expected: str) -> None:
    SCRIPTS[f"hostile_{label}"] = once(call)
    env = FileEnv()
    traj, env = run(variant("json", f"script/hostile_{label}"), env=env)
    assert traj.status == "completed" and traj.infra_error is None  # scored, never skipped
    errors = [c.parse_error or "" for c in traj.model_calls] + [c.error or "" for c in traj.tool_calls]
    assert any(expected in e for e in errors), errors
    assert all(len(e) <= MAX_ECHO_CHARS + 200 for e in errors)  # what goes back to the model is clipped
    assert env.dirs["archive"] == [] and "report.pdf" in env.files  # the backend never acted on it
    # nothing megabyte-sized is kept in the record's errors either
    assert len(json.dumps([c.parse_error for c in traj.model_calls] + [c.error for c in traj.tool_calls])) < MAX_ARGUMENT_CHARS


BASH = [
    ("bomb", "```tool\ntail --file_name log.txt --lines " + "[" * 50_000 + "]" * 50_000 + "\n```", "limit is"),
    ("deep", "```tool\ntail --file_name log.txt --lines " + "[" * 3000 + "]" * 3000 + "\n```", "nested too deeply"),
    ("quotes", "```tool\nmv --source 'report.pdf --destination archive\n```", "check the quotes"),
    ("dunder", "```tool\n__import__ --name os\n```", "unknown tool '__import__'"),
    ("wrong_type", "```tool\ntail --file_name log.txt --lines '\"two\"'\n```", "do not match its parameters"),
]


@pytest.mark.parametrize("label, text, expected", BASH, ids=[n[0] for n in BASH])
def test_hostile_text_calls_are_scored_mistakes(label: str, text: str, expected: str) -> None:
    SCRIPTS[f"hostile_bash_{label}"] = once(text)
    traj, env = run(variant("bash", f"script/hostile_bash_{label}"))
    assert traj.status == "completed" and traj.infra_error is None
    errors = [c.parse_error or "" for c in traj.model_calls] + [c.error or "" for c in traj.tool_calls]
    assert any(expected in e for e in errors), errors
    assert all(len(e) <= MAX_ECHO_CHARS + 200 for e in errors)
    assert env.dirs["archive"] == []


def test_an_oversized_call_is_not_echoed_into_later_requests() -> None:
    seen: list[int] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(len(json.dumps(messages)))
        if messages[-1]["role"] == "tool":
            return {"content": "Done."}
        return {"tool_calls": [{"name": "mv", "arguments": json.dumps({"source": HUGE, "destination": "archive"})}]}

    SCRIPTS["hostile_echo"] = script
    run(variant("json", "script/hostile_echo"))
    assert len(seen) >= 2 and max(seen[1:]) < MAX_ARGUMENT_CHARS  # the 131 KB call never travels again
