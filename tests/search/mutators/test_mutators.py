"""Mutators: one contract suite run against every registered mutator, then per-mutator tests.

LLM mutators go through litellm for real: a custom provider registered here answers with
``evoharness.compiler.sim.rewriter.rewrite_reply`` (what the sim provider will answer once hooked).
"""
from __future__ import annotations

import copy
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from evoharness.compiler.catalog import build_catalog, select_tools
from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.runtime.workload import Failure as Record
from evoharness.compiler.sim.rewriter import rewrite_reply
from evoharness.search.genome import Genome, PoolEntry, initial_pools
from evoharness.search.mutators.base import (
    Control,
    FailedEpisode,
    MutationContext,
    Proposal,
    ToolLoad,
    grow_pools,
    known_mutators,
    make_mutator,
)
from evoharness.search.mutators.llm import check_section, check_step, redact_call
from evoharness.search.mutators.rule_miner import MaskedFailure, mask_values, parse_failures
from evoharness.search.mutators.wordings import STEP_KINDS
from evoharness.testing import MutationCase, MutatorContract, order_desk_case
from tests.compiler.fixtures import configs

ROOT = Path(__file__).resolve().parents[3]
LLM_MUTATORS = ("llm_prompt_rewriter", "llm_workflow_editor", "teacher_gap_rewriter")
# Values that appear only as task values in the evidence and the teacher's calls: no proposal may carry one.
GOLD = ("archive_98765", "arch1ve", "secret_gold_file", "31337", "gold_value_4242", "temp_gold_777", "tmp_wrong",
        "gold_folder_555", "zz_gold")
MODELS: dict[str, dict[str, Any]] = {"base": {"route": "sim/small", "temperature": 0.0}, "sim_medium": {"route": "sim/medium"},
                                     "sim_large": {"route": "sim/large"}}
PRICES = {"base": 1e-7, "sim_medium": 6e-7, "sim_large": 3e-6}  # USD per input token
REQUESTS: list[dict[str, Any]] = []


# -- a litellm provider answering like the simulator will ----------------------------------

def _user(kwargs: Mapping[str, Any]) -> str:
    details = getattr(kwargs.get("logging_obj"), "model_call_details", None) or {}
    for found in ((kwargs.get("optional_params") or {}).get("user"), (kwargs.get("litellm_params") or {}).get("user"), details.get("user")):
        if found:
            return str(found)
    raise AssertionError("the request carried no user field")


def _register(provider: str, reply: Callable[[str, list[dict[str, Any]]], str | None]) -> None:
    lm: Any = litellm_module()
    from litellm import CustomLLM

    class Handler(CustomLLM):
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            user = _user(kwargs)
            task_id = dict(p.partition("=")[::2] for p in user.split(";"))["task_id"]
            REQUESTS.append({"model": model, "user": user, "messages": copy.deepcopy(messages),
                             "seed": (kwargs.get("optional_params") or {}).get("seed")})
            text = reply(task_id, messages)
            if text is None:
                raise lm.BadRequestError(message=f"not a rewrite request: {task_id}", model=model, llm_provider=provider)
            return lm.ModelResponse(model=model, choices=[lm.Choices(index=0, finish_reason="stop",
                                                                     message=lm.Message(role="assistant", content=text))],
                                    usage=lm.Usage(prompt_tokens=10, completion_tokens=10, total_tokens=20))

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return self.completion(model, messages, *args, **kwargs)

    lm.custom_provider_map = ([e for e in lm.custom_provider_map if e.get("provider") != provider]
                              + [{"provider": provider, "custom_handler": Handler()}])


@pytest.fixture(scope="module", autouse=True)
def providers() -> None:
    _register("rewritetest", rewrite_reply)
    _register("guttest", lambda task, msgs: '<step>{"name": "act"}</step>' if "workflow" in task else "<section>Be careful.</section>")


# -- contexts -------------------------------------------------------------------------------

def ev(task_id: str, *records: Record, errors: tuple[str, ...] = ()) -> FailedEpisode:
    """A failed episode as the scorer reports it; the detail is free text no mutator may read."""
    return FailedEpisode(task_id, detail="turn 0: some scorer wording naming nothing.parse_me: model='x'", tool_errors=errors,
                         failures=records)


def _teacher(task_ids: Sequence[str]) -> dict[str, list[str]]:
    return {t: ["mv(source='report.pdf', destination='archive_98765')", "tail(file_name='secret_gold_file.txt', lines=31337)"]
            for t in task_ids}


def fixture_ctx() -> tuple[MutationContext, dict[str, Any]]:
    agent, tool, _ = configs()
    tools = {s.name: s for s in select_tools(agent["tools"], build_catalog(tool))}
    pools = initial_pools(agent, models=["sim_medium"], temperatures=[0.0, 0.7], base_model="base", base_temperature=0.0)
    pools = replace(
        pools,
        sections={**pools.sections,
                  "policy": pools.sections["policy"] + (PoolEntry("Use only the tools offered. Ask when a value is missing.", "test"),)},
        tools={"mv": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["move one file per call"]}, "test"))},
        toolsets=pools.toolsets + (PoolEntry(["ls", "mv"], "test"),),
    )
    evidence = (
        ev("files/1", Record("wrong_value", "mv", "destination", "archive_98765", "arch1ve", 0),
           errors=("mv: No such directory: 'gold_value_4242'",)),
        ev("files/2", Record("wrong_value", "mv", "destination", "archive_98765", "x", 1), Record("non_termination", turn=1)),
        ev("files/3", Record("missed_call", "tail", None, {"file_name": "secret_gold_file.txt", "lines": 31337}, None, 1),
           Record("non_termination", turn=1)),
        ev("files/4", Record("unneeded_call", "ls", None, None, {"a": True}, 0)),
    )
    front = (Genome(sections={"policy": 1}, tools={"mv": 1}, toolset=1), Genome())
    ctx = MutationContext(agent=agent, tools=tools, pools=pools, front=front, evidence=evidence, models=tuple(MODELS), round=1,
                          prices=PRICES,
                          run_teacher=_teacher, load={"ls": ToolLoad(calls=10, chars=30_000, longest=8_000, episodes=4, turns=16)})
    return ctx, tool


def bfcl_ctx() -> tuple[MutationContext, dict[str, Any]]:
    raw = OmegaConf.to_container(OmegaConf.load(ROOT / "evoharness/conf/agent/bfcl_agent.yaml"), resolve=True)
    assert isinstance(raw, dict)
    agent = {str(k): v for k, v in raw.items() if k != "defaults"}
    tool: dict[str, Any] = {"source": "bfcl"}
    tools = {s.name: s for s in select_tools(agent["tools"], build_catalog(tool))}
    pools = initial_pools(agent, models=["sim_medium"], temperatures=[0.7], base_model="base", base_temperature=0.7)
    evidence = (
        ev("bfcl/multi_turn_base_0", Record("missing_argument", "mkdir", "dir_name", "temp_gold_777", None, 0),
           Record("no_recovery", "mkdir", None, None, "unexpected argument(s) ['name']", 0),
           errors=("mkdir: unexpected argument(s) ['name']",)),
        ev("bfcl/multi_turn_base_1", Record("missed_call", "cd", None, {"folder": "gold_folder_555"}, None, 2),
           Record("missed_call", "ls", None, {}, None, 2)),
        ev("bfcl/multi_turn_base_2", Record("unneeded_call", "rm", None, None, {"file_name": "zz_gold"}, 1)),
        ev("bfcl/multi_turn_base_3", Record("unneeded_call", "touch", None, None, {"file_name": "tmp_wrong"}, 1)),
    )
    ctx = MutationContext(agent=agent, tools=tools, pools=pools, front=(Genome(),), evidence=evidence, models=tuple(MODELS), round=1,
                          prices=PRICES,
                          run_teacher=_teacher, load={"cat": ToolLoad(calls=9, chars=41_000, longest=12_000, episodes=4, turns=14)})
    return ctx, tool


CONTEXTS = {"fixture": fixture_ctx, "bfcl": bfcl_ctx}
SILENT = {  # mutators with nothing honest to propose in a context (each documents why)
    "fixture": {"tool_format"},
    # bfcl offers every tool ("*"): nothing to attach; one tool error is below escalate_on_trouble's two episodes,
    # and no turn ran out of calls
    "bfcl": {"tool_format", "tool_attach", "escalate_on_trouble", "turn_limit"},
    "order_desk": {"tool_format", "teacher_gap_rewriter"},  # the order desk has no teacher
}
# The built-ins that draw their proposals from the failure records (the LLM mutators send them to
# their model). tool_attach is not among them
# here: where the anchor lacks only one tool, it attaches that tool whatever the records say.
EVIDENCE_DRIVEN = {"rule_miner", "workflow_step_append", "tool_rule_add", "tool_description_append", "tool_detach",
                   "llm_prompt_rewriter", "llm_workflow_editor", "teacher_gap_rewriter", "escalate_on_trouble", "turn_limit"}


def make(name: str, **params: Any) -> Any:
    if name in LLM_MUTATORS:
        params.setdefault("route", "rewritetest/medium")
        params.setdefault("send_episode_id", True)  # the simulator behind rewritetest/ reads the request id
    return make_mutator(name, **params)


def run(name: str, ctx: MutationContext, seed: int = 11, **params: Any) -> list[Proposal | Control]:
    return list(make(name, **params).propose(ctx, rng=random.Random(seed)))


def proposals(name: str, ctx: MutationContext, **params: Any) -> list[Proposal]:
    out = run(name, ctx, **params)
    assert all(isinstance(p, Proposal) for p in out)
    return [p for p in out if isinstance(p, Proposal)]


# -- the contract suite (evoharness.testing.MutatorContract) --------------------------------

def _case(name: str) -> MutationCase:
    if name == "order_desk":
        return order_desk_case()
    ctx, tool = CONTEXTS[name]()
    return MutationCase(context=ctx, tool=tool, models=MODELS, task_values=GOLD, name=name)


class TestMutatorContract(MutatorContract):
    """Every registered mutator, in the project's two contexts and the suite's own order desk."""

    @pytest.fixture(params=known_mutators())
    def mutator_name(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(params=[*sorted(CONTEXTS), "order_desk"])
    def mutation_case(self, request: pytest.FixtureRequest) -> MutationCase:
        return _case(str(request.param))

    def make(self, name: str) -> Any:
        return make(name)

    def silent(self, name: str, case: MutationCase) -> bool:
        return name in SILENT[case.name]

    def reads_evidence(self, name: str) -> bool:
        return name in EVIDENCE_DRIVEN


def test_every_builtin_is_registered() -> None:
    assert set(known_mutators()) >= {
        "identity", "prompt_prefix", "prompt_suffix", "section_rewriter", "temperature", "tool_description_append", "tool_rule_add",
        "tool_format", "workflow_step_append", "workflow_step_remove", "tool_attach", "tool_detach", "model_swap", "rule_miner",
        *LLM_MUTATORS,
    }


# -- evidence parsing and the rule miner --------------------------------------------------

@pytest.mark.parametrize("records, expected", [
    ([Record("wrong_value", "mkdir", "dir_name", "temp", "tmp", 0)], [MaskedFailure("wrong_value", "mkdir", "dir_name")]),
    ([Record("propagation", "mv", "source", "a.txt", "a.tx", 1)], [MaskedFailure("propagation", "mv", "source")]),
    ([Record("missing_argument", "mkdir", "dir_name", "temp", None, 0)], [MaskedFailure("missing_argument", "mkdir", "dir_name")]),
    ([Record("no_recovery", "tail", None, None, "No such file: 'file3.txt' (12 lines)", 2)],
     [MaskedFailure("no_recovery", "tail", None, "No such file: '…' (N lines)")]),
    ([Record("missed_call", "diff", None, {"file_name1": "a.pdf"}, None, 1), Record("missed_call", "diff", None, {}, None, 1)],
     [MaskedFailure("missed_call", "diff")]),  # one episode, one failure per (kind, tool, argument)
    ([Record("wrong_tool", "cd", None, None, "ls", 0), Record("premature_stop", "mv", None, None, None, 0)],
     [MaskedFailure("wrong_tool", "cd"), MaskedFailure("premature_stop", "mv")]),
    ([Record("non_termination", turn=4)], []),  # names no tool: nothing a rule could address
    ([Record("wrong_value", "not a name", "x", 1, 2, 0), Record("wrong_value", "cd", "a b", 1, 2, 0)],
     [MaskedFailure("wrong_value", "cd", None)]),  # never an identifier made of text
])
def test_parse_failures_reads_the_records(records: list[Record], expected: list[MaskedFailure]) -> None:
    assert list(parse_failures(ev("t/1", *records, errors=("cd: tool 'cd' is not offered",)))) == expected


def test_an_unknown_failure_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="failure kind 'oops' is unknown"):
        Record("oops", "cd")


@pytest.mark.parametrize("error, masked", [
    ("No such file or directory: 'report.pdf'", "No such file or directory: '…'"),
    ("cannot move archive/report.pdf to 2024.backup", "cannot move … to …"),
    ("insufficient funds: balance 12.5 < 150", "insufficient funds: balance N < N"),
])
def test_mask_values(error: str, masked: str) -> None:
    assert mask_values(error) == masked


def test_rule_miner_names_tool_and_argument_without_values() -> None:
    ctx, _ = fixture_ctx()
    out = proposals("rule_miner", ctx)
    tool = next(p for p in out if p.kind == "tool")
    section = next(p for p in out if p.kind == "section")
    assert tool.key == "mv" and tool.entry.value["rules"][0] == "move one file per call"  # stacked on the anchor's edit
    rule = tool.entry.value["rules"][1]
    assert "`mv`" in rule and "`destination`" in rule and rule in section.entry.value
    assert section.key == "policy" and section.entry.value.startswith("Use only the tools offered. Ask when")
    assert "`tail`" in section.entry.value  # the missing call is a tool-level rule
    assert not [g for g in GOLD if g in repr([p.entry for p in out])]


def test_rule_miner_top_k_and_min_count() -> None:
    ctx, _ = fixture_ctx()
    args = ("source", "destination", "destination", "mode", "mode", "mode")
    ctx = replace(ctx, evidence=tuple(ev(f"t/{i}", Record("wrong_value", "mv", a, 1, 2, 0)) for i, a in enumerate(args)))
    [tool, section] = proposals("rule_miner", ctx, top_k=2)
    added = tool.entry.value["rules"][1:]
    assert [next(a for a in ("mode", "destination", "source") if f"`{a}`" in r) for r in added] == ["mode", "destination"]
    assert section.entry.value.count("\n- ") == 2
    [tool] = proposals("rule_miner", ctx, min_count=3, targets="tool")
    assert len(tool.entry.value["rules"]) == 2 and "`mode`" in tool.entry.value["rules"][1]
    assert run("rule_miner", ctx, min_count=7) == []


@pytest.mark.parametrize("name, params", [("rule_miner", {"top_k": 0}), ("rule_miner", {"targets": "all"}), ("identity", {"count": -1}),
                                          ("llm_prompt_rewriter", {"route": "gpt4"}), ("tool_detach", {"count": 1.5})])
def test_bad_params_name_the_value(name: str, params: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(next(iter(params.values()))))):
        make_mutator(name, **params)


def test_an_explicit_missing_section_is_an_error() -> None:
    ctx, _ = fixture_ctx()
    with pytest.raises(ValueError, match="'rules'.*one of"):
        run("prompt_prefix", ctx, section="rules")


# -- structural and numeric mutators --------------------------------------------------------

def test_identity_returns_controls_of_the_best_front_genomes() -> None:
    ctx, _ = fixture_ctx()
    assert run("identity", ctx) == [Control(ctx.front[0], "identity"), Control(ctx.front[1], "identity")]
    assert run("identity", ctx, count=1) == [Control(ctx.front[0], "identity")]
    assert run("identity", replace(ctx, front=())) == [Control(Genome(), "identity")]


def test_temperature_fills_zero_then_the_widest_gap() -> None:
    ctx, _ = fixture_ctx()
    assert [p.entry.value for p in proposals("temperature", ctx)] == [0.35]
    only_hot = replace(ctx.pools, temperatures=(PoolEntry(0.7, "baseline"),))
    assert [p.entry.value for p in proposals("temperature", replace(ctx, pools=only_hot))] == [0.0]
    dense = replace(ctx.pools, temperatures=tuple(PoolEntry(t / 20, "x") for t in range(21)))
    assert run("temperature", replace(ctx, pools=dense)) == []


def test_tool_detach_never_removes_a_tool_the_evidence_needs() -> None:
    ctx, _ = fixture_ctx()
    [p] = run("tool_detach", ctx)
    assert isinstance(p, Proposal) and p.entry.value == ["mv"]  # ls was only called wrongly
    needed = replace(ctx, evidence=ctx.evidence + (ev("files/5", Record("missed_call", "ls", None, {"a": True}, None, 0)),))
    assert run("tool_detach", needed) == []
    rows = ctx.evidence + (ev("files/6", Record("unneeded_call", "tail", None, None, {"file_name": "a"}, 0)),)
    attached = replace(ctx, evidence=rows, front=(Genome(),))  # baseline offers ls, mv, tail; tail is also a missing call in files/3
    [p] = run("tool_detach", attached, count=3)
    assert isinstance(p, Proposal) and p.entry.value == ["mv", "tail"]


def test_tool_attach_adds_back_the_missing_tool() -> None:
    ctx, _ = fixture_ctx()
    [p] = run("tool_attach", ctx)
    assert isinstance(p, Proposal) and p.entry.value == ["ls", "mv", "tail"]


def test_workflow_steps_are_new_names_or_made_switchable() -> None:
    ctx, _ = fixture_ctx()
    append, other = run("workflow_step_append", ctx)  # two wordings of the step the evidence calls for
    assert isinstance(other, Proposal) and other.key != append.key and other.entry.value != append.entry.value
    assert isinstance(append, Proposal) and append.key not in [s["name"] for s in ctx.agent["workflow"]]
    # two of the four failed episodes are wrong values: the step checks arguments, and says for which failures
    assert append.entry.value["instructions"] in {w for _, w in STEP_KINDS["arguments"].wordings}
    assert append.entry.note.startswith("argument check") and "2 failed episode(s): wrong_value 2 (mv.destination)" in append.entry.note
    assert append.entry.value["after"] == ["report"] and append.entry.value["optional"] is True
    [remove] = run("workflow_step_remove", ctx)
    assert isinstance(remove, Proposal) and remove.key == "report" and remove.entry.value["optional"] is True
    assert append not in run("workflow_step_append", replace(ctx, pools=grow_pools(ctx.pools, [append])[0]))


def test_model_swap_proposes_only_unpooled_models() -> None:
    ctx, _ = fixture_ctx()
    assert [p.entry.value for p in proposals("model_swap", ctx)] == ["sim_large"]
    assert run("model_swap", replace(ctx, models=("base", "sim_medium"))) == []


def test_tool_description_append_uses_the_parameter_schema() -> None:
    ctx, _ = fixture_ctx()
    [p] = run("tool_description_append", ctx)
    assert isinstance(p, Proposal) and p.key == "mv"
    first = p.entry.value["description_append"].split(".")[0]
    assert "`destination`" in first and "required" in first and "Target directory" in first  # the failing argument first
    assert "wrong_value 2 (mv.destination)" in p.entry.note


# -- LLM mutators through litellm -----------------------------------------------------------

def test_llm_prompt_rewriter_round_trip_through_litellm() -> None:
    ctx, _ = fixture_ctx()
    REQUESTS.clear()
    [p] = run("llm_prompt_rewriter", ctx)
    [request] = REQUESTS
    assert request["user"] == "task_id=mutator/llm_prompt_rewriter" and isinstance(request.get("seed"), int)
    prompt = request["messages"][-1]["content"]
    assert "<current>\nUse only the tools offered. Ask when a value is missing.\n</current>" in prompt
    assert "`mv.destination`" in prompt and not [g for g in GOLD if g in prompt]
    assert isinstance(p, Proposal) and p.key == "policy"
    assert "When calling `mv`, double-check `destination`" in p.entry.value and "Call `tail` whenever" in p.entry.value
    assert "Call `ls` only when the request asks" in p.entry.value  # ls was only called wrongly


def test_llm_workflow_editor_adds_a_unique_verify_step() -> None:
    ctx, _ = fixture_ctx()
    [p] = run("llm_workflow_editor", ctx)
    assert isinstance(p, Proposal) and p.key == "verify_calls" and p.entry.value["trigger"] == "before_final"
    assert p.entry.value["after"] == ["report"] and "`mv.destination`" in p.entry.value["instructions"]
    taken = grow_pools(ctx.pools, [p])[0]
    [q] = run("llm_workflow_editor", replace(ctx, pools=taken))
    assert isinstance(q, Proposal) and q.key == "verify_calls_2"


def test_teacher_gap_rewriter_needs_a_teacher_and_redacts_its_values() -> None:
    ctx, _ = fixture_ctx()
    assert run("teacher_gap_rewriter", replace(ctx, run_teacher=None)) == []
    REQUESTS.clear()
    [p] = run("teacher_gap_rewriter", ctx)
    prompt = REQUESTS[-1]["messages"][-1]["content"]
    assert "`mv`(source, destination)" in prompt and not [g for g in GOLD if g in prompt]
    assert isinstance(p, Proposal) and ("When the request needs `mv`, call it as a careful expert does, "
                                        "with `source` and `destination` taken") in p.entry.value


def test_llm_output_that_guts_the_section_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    ctx, _ = fixture_ctx()
    with caplog.at_level(logging.WARNING):
        assert run("llm_prompt_rewriter", ctx, route="guttest/x") == []
        assert run("llm_workflow_editor", ctx, route="guttest/x") == []
    assert "guts the original" in caplog.text and "'act' is taken" in caplog.text


def test_a_route_failure_raises() -> None:
    ctx, _ = fixture_ctx()
    _register("failtest", lambda task, msgs: None)  # the handler answers None with a 400
    from evoharness.compiler.runtime.models import RouteConfigError

    # through the model client a 400 is a route error: every call would repeat it
    with pytest.raises(RouteConfigError, match="HTTP 400: not a rewrite request"):
        run("llm_prompt_rewriter", ctx, route="failtest/x")


@pytest.mark.parametrize("original, new, ok", [
    ("Be brief. Use tools.", "Be brief. Use tools. Check `ls`.", True),
    ("Be brief. Use tools.", "", False),
    ("Be brief. Use tools.", "Be brief. Use tools.", False),
    ("Use only the tools offered. Never guess a value.", "Use tools.", False),
    ("Use only the tools offered. Never guess a value.", "- Use only the tools offered.\n- Never guess a value.", True),
    ("Be brief.", "Be brief. {{ secret }}", False),
    ("You are {{ agent_name }}.", "You are {{ agent_name }}. Be exact.", True),
])
def test_check_section(original: str, new: str, ok: bool) -> None:
    assert (check_section(original, new) is None) == ok


@pytest.mark.parametrize("reply, taken, ok", [
    ('<step>{"name": "check_ids", "instructions": "Check ids.", "trigger": "prompt"}</step>', ["act"], True),
    ('<step>{"name": "act", "instructions": "Act.", "trigger": "prompt"}</step>', ["act"], False),
    ('<step>{"name": "x", "instructions": "X.", "trigger": "always"}</step>', [], False),
    ('<step>{"name": "Bad Name", "instructions": "X."}</step>', [], False),
    ("<step>__import__('os')</step>", [], False),
    ("no step here", [], False),
])
def test_check_step(reply: str, taken: list[str], ok: bool) -> None:
    assert isinstance(check_step(reply, taken), dict) == ok


def test_redact_call_keeps_names_only() -> None:
    assert redact_call("mv(source='a.txt', destination='gold')") == "`mv`(source, destination)"
    assert redact_call("mv --source a.txt --destination gold") == "`mv`(source, destination)"
    assert redact_call("cd(folder='trunc...") == "`cd`(folder)"


# -- the simulator's side --------------------------------------------------------------------

def test_rewrite_reply_ignores_other_tasks_and_is_deterministic() -> None:
    msgs = [{"role": "user", "content": "<task>rewrite_section</task>\n<current>\nBe brief.\n</current>\n"
                                        "<evidence>\n- wrong value for `cd.folder`\n</evidence>"}]
    assert rewrite_reply("bfcl/multi_turn_base_0", msgs) is None
    a = rewrite_reply("mutator/llm_prompt_rewriter", msgs)
    assert a == rewrite_reply("mutator/llm_prompt_rewriter", copy.deepcopy(msgs))
    assert a == ("<section>\nBe brief.\n- When calling `cd`, double-check `folder` against the user's request and the latest tool result.\n"
                 "</section>")
    assert rewrite_reply("mutator/unknown", [{"role": "user", "content": "hello"}]) is None
