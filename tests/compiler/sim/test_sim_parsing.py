"""Reading requests: the user string, message classification, turns, and the system prompt
exactly as the project's compiler renders it."""
from __future__ import annotations

import json

import pytest

from evoharness.compiler.sim.conversation import FAULT_MARKER, SimRequestError, classify, is_error_result, parse_user, split_conversation
from evoharness.compiler.sim.features import extract_features, names
from evoharness.compiler.variant import compile_agent

TOOLS = {
    "source": None,
    "definitions": {
        "ls": {"description": "List the files in the current directory, hidden ones on request.",
               "parameters": {"type": "object", "properties": {"a": {"type": "boolean", "description": "Include hidden files."}},
                              "required": []},
               "rules": ["pass a=true when the user asks for hidden files"]},
        "mv": {"description": "Move a file into a directory.",
               "parameters": {"type": "object", "properties": {
                   "source": {"type": "string", "description": "File to move, by exact name."},
                   "destination": {"type": "string"}}, "required": ["source", "destination"]},
               "examples": ["mv --source report.pdf --destination archive"], "mutates_state": True},
    },
    "overrides": {},
}


def agent(tool_format: str, *, verify: bool = True, style: str = "Be concise.") -> dict:
    workflow = [{"name": "plan", "instructions": "Decide which tools the request needs."},
                {"name": "act", "instructions": "Call the tools in order.", "after": ["plan"]}]
    if verify:
        workflow.append({"name": "check", "instructions": "Verify every result before answering.",
                         "after": ["act"], "optional": True, "trigger": "before_final"})
    return {"name": "files", "tool_format": tool_format, "tools": ["ls", "mv"], "max_turns": 8,
            "prompt_sections": {"role": "You manage files.", "style": style}, "workflow": workflow}


def compiled(tool_format: str, **kw):
    return compile_agent(agent(tool_format, **kw), tool=TOOLS, model={"route": "sim/small", "temperature": 0.3})


@pytest.mark.parametrize("tool_format", ["json", "bash", "both"])
def test_features_of_a_compiled_variant(tool_format):
    v = compiled(tool_format)
    f = extract_features(v.system_prompt, v.native_tools_for(None) or None, 0.3)
    assert f.tool_format == tool_format
    assert sorted(f.tools) == ["ls", "mv"]
    assert f.tools["mv"].params["source"].description == "File to move, by exact name."
    assert f.tools["mv"].params["destination"].description == ""
    assert f.tools["mv"].params["source"].required
    assert [s.name for s in f.procedure] == ["plan", "act", "check"] and f.has_verify
    assert f.step("check") is not None and f.step("check").is_verify
    assert f.rule_names_arg("ls", "a") and not f.rule_names_arg("mv", "source")
    assert f.example_names_tool("mv") and not f.example_names_tool("ls")
    assert f.style == -1 and f.temperature == 0.3
    assert f.prompt_tokens == len(v.system_prompt) // 4


def test_bash_tool_docs_are_not_mistaken_for_rules():
    v = compiled("bash")
    f = extract_features(v.system_prompt, None, 0.0)
    # the usage line "mv --source <string>  File to move" names mv and source but is not a rule
    assert not f.rule_names_arg("mv", "source")


def test_style_cues():
    assert extract_features(compiled("json", style="Give a detailed answer; explain.").system_prompt, None, 0).style == 1
    assert extract_features(compiled("json", style="Answer.").system_prompt, None, 0).style == 0
    assert not extract_features(compiled("json", verify=False).system_prompt, None, 0).has_verify


def test_names_is_whole_word():
    assert names("use cd --folder x", "cd") and names("mv: keep source", "source")
    assert not names("abcd", "cd") and not names("file_names", "file_name")


def test_parse_user():
    meta = parse_user("task_id=bfcl/multi_turn_base_3")
    assert (meta.task_id, meta.attempt, meta.workload) == ("bfcl/multi_turn_base_3", None, "bfcl")
    assert parse_user("task_id=a/b;attempt=3").attempt == 3
    for bad in (None, "", "sample=1", "task_id=nohash", "task_id=a/b;attempt=x", "task_id=a/b;sample=1;seed=0"):
        with pytest.raises(SimRequestError, match="task_id=<workload>/<id>"):
            parse_user(bad)


def test_classify_messages():
    assert classify({"role": "user", "content": '<tool_result name="ls">\nError: boom\n</tool_result>'}).has_error_result
    step = classify({"role": "user", "content": '<workflow_step name="verify">\ncheck\n</workflow_step>'})
    assert step.kind == "workflow_step" and step.step == "verify"
    call = classify({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{\"a\": true}"}}]})
    assert call.calls[0].arguments == {"a": True} and not call.is_fault
    broken = classify({"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{\"a\""}}]})
    assert broken.is_fault
    assert classify({"role": "assistant", "content": "cut " + FAULT_MARKER}).is_fault
    assert classify({"role": "user", "content": [{"type": "text", "text": "hi"}]}).text == "hi"


def test_error_results():
    assert is_error_result("Error: TypeError: x") and is_error_result(json.dumps({"error": "no such file"}))
    assert not is_error_result('{"result": "ok"}') and not is_error_result("no errors here")


def test_turns_match_task_text_and_ignore_tool_results_steps_and_feedback():
    texts = [["first"], ["second", "second, continued"]]
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "first"},
            {"role": "assistant", "content": "done"}, {"role": "user", "content": "second"},
            {"role": "user", "content": "second, continued"},
            {"role": "user", "content": '<tool_result name="ls">\nx\n</tool_result>'},
            {"role": "user", "content": '<workflow_step name="verify">\nv\n</workflow_step>'},
            {"role": "user", "content": "could not parse that"}]
    conv = split_conversation(msgs, texts)
    assert conv.turn == 1 and conv.system_prompt == "s"
    assert [e.kind for e in conv.current] == ["tool_results", "workflow_step", "feedback"]
    # without the task's texts: count user messages
    assert split_conversation(msgs[:4]).turn == 1


def test_repeated_user_text_goes_to_the_next_turn_that_has_it():
    texts = [["go"], ["again"], ["go"]]
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go"}]
    assert split_conversation(msgs[:1], texts).turn == 0
    assert split_conversation(msgs, texts).turn == 2
    assert split_conversation([{"role": "system", "content": "s"}], texts).turn == 0
