"""The simulated model's answers to harness-editing requests (the LLM mutators' requests).

Pure and deterministic: (task id, messages) in, assistant text out. A request is one when its
task id starts with ``mutator/``; its format is defined in ``search/mutators/llm.py``: tagged
blocks in the last user message, evidence lines naming tools as `tool` and tool/argument pairs
as `tool.arg`. The simulator edits like a diligent but unimaginative engineer: it keeps the
current text and adds one sentence per tool/argument the evidence names, so the offline loop
exercises the LLM mutators without pretending to be a creative model.

On the documented surface its sentences are the shapes the model card's formula rewards. On a blind
surface they come from a generic phrasing pool, picked by a hash of the request: the pool does not
know which words that surface responds to, as a real model's edits do not know the real model's.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evoharness.compiler.sim.rng import uniform

PREFIX = "mutator/"
MAX_ADDED = 6  # sentences per reply: enough to cover a round's evidence, bounded prompt growth
_PAIR = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`")
_TOOL = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`(?!\.)")
_TEACHER_CALL = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`\(([^)]*)\)")


def _block(text: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return m.group(1) if m else None


def _request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def _mentions(evidence: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(tool, arg) pairs and tools without a pair, in order of first mention."""
    pairs = list(dict.fromkeys(_PAIR.findall(evidence)))
    paired = {t for t, _ in pairs}
    tools = [t for t in dict.fromkeys(_TOOL.findall(evidence)) if t not in paired]
    return pairs, tools


def _called_wrongly(evidence: str, tool: str) -> bool:
    """Whether every mention of ``tool`` is a call it should not have made."""
    fragments = [f for line in evidence.splitlines() for f in line.split("; ") if f"`{tool}`" in f]
    wrong = ("unneeded call to", "was not offered", "which is no tool")
    return bool(fragments) and all(any(w in f for w in wrong) for f in fragments)


def _extend(current: str, sentences: Sequence[str]) -> str:
    new = [s for s in dict.fromkeys(sentences) if s not in current][:MAX_ADDED]
    return current.rstrip() + "".join(f"\n- {s}" for s in new)


# A blind surface's pool: plain instruction English in several shapes, none chosen for a cue.
PAIR_PHRASES = (
    "When calling `{t}`, double-check `{a}` against the user's request and the latest tool result.",
    "Take `{a}` for `{t}` exactly as the request or the last tool result gives it.",
    "Be careful with `{a}` when you call `{t}`; it is easy to get wrong.",
    "Copy `{a}` into `{t}` character for character from where it appears.",
    "Before `{t}` runs, re-read where `{a}` comes from.",
    "`{t}` needs the right `{a}`: use the value the user or a tool gave, not a guess.",
)
TOOL_PHRASES = (
    "Call `{t}` whenever the request needs it, with every required argument.",
    "Do not forget `{t}` when the request calls for it.",
    "Use `{t}` for what it is for, and fill in each argument it needs.",
    "If the task involves what `{t}` does, call `{t}` before answering.",
)
WRONG_PHRASES = (
    "Call `{t}` only when the request asks for what it does.",
    "Avoid `{t}` unless the user's request needs it.",
    "`{t}` is not a default step; use it only when asked.",
)
STEP_PHRASES = (
    ("verify_calls", "Before your final answer, verify each tool result of this request against what was asked"),
    ("review_calls", "Before answering, review every call you made and its result"),
    ("check_work", "Before the final answer, check that each call did what the request asked"),
    ("confirm_results", "Before replying, confirm the results match the request"),
    ("look_back", "Before you answer, look back over the calls and their results"),
    ("second_pass", "Before answering, go over the calls once more"),
)


def _pick(pool: Sequence[Any], *key: object) -> Any:
    return pool[int(uniform("rewriter", *key) * len(pool))]


def _rewrite_section(text: str, blind: bool = False) -> str:
    current = _block(text, "current") or ""
    evidence = _block(text, "evidence") or ""
    pairs, tools = _mentions(evidence)
    # the documented surface always says it the first way; a blind one picks from the pool
    def say(pool: Sequence[str], *key: object) -> str:
        return str(_pick(pool, text, *key)) if blind else pool[0]

    sentences = [say(PAIR_PHRASES, t, a).format(t=t, a=a) for t, a in pairs]
    sentences += [say(WRONG_PHRASES if _called_wrongly(evidence, t) else TOOL_PHRASES, t).format(t=t) for t in tools]
    return f"<section>\n{_extend(current, sentences)}\n</section>"


def _teacher_section(text: str, blind: bool = False) -> str:
    current = _block(text, "current") or ""
    pairs, tools = _mentions(_block(text, "evidence") or "")
    failing = {t for t, _ in pairs} | set(tools)
    calls = list(dict.fromkeys(_TEACHER_CALL.findall(_block(text, "teacher") or "")))
    calls.sort(key=lambda c: c[0] not in failing)  # the gap first: tools the student got wrong
    sentences = []
    for tool, args in calls:
        names = [f"`{a.strip()}`" for a in args.split(",") if a.strip()]
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)
        using = f", with {listed} taken exactly from the request or earlier tool results" if names else ""
        if blind:
            using = f", taking {listed} from the request or earlier tool results" if names else ""
            lead = _pick(("When the request needs `{t}`, call it{u}.", "For `{t}`, do as an expert would{u}.",
                          "Use `{t}` the way the reference solution does{u}."), text, tool)
            sentences.append(str(lead).format(t=tool, u=using))
            continue
        sentences.append(f"When the request needs `{tool}`, call it as a careful expert does{using}.")
    return f"<section>\n{_extend(current, sentences)}\n</section>"


def _workflow_step(text: str, blind: bool = False) -> str:
    taken = {n.strip() for n in (_block(text, "step_names") or "").split(",")}
    base, lead = _pick(STEP_PHRASES, text) if blind else STEP_PHRASES[0]
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    pairs, tools = _mentions(_block(text, "evidence") or "")
    focus = [f"`{t}.{a}`" for t, a in pairs[:4]] + [f"`{t}`" for t in tools[: max(0, 4 - len(pairs))]]
    instructions = lead
    instructions += f"; re-check {', '.join(focus)}" if focus else ""
    instructions += (". If a call failed or used a wrong value, call it again correctly." if not blind
                     else ". Redo any call that failed or used a wrong value.")
    step = {"name": name, "instructions": instructions, "trigger": "before_final"}
    return f"<step>{json.dumps(step, sort_keys=True)}</step>"


_HANDLERS: dict[str, Callable[[str, bool], str]] = {
    "mutator/llm_prompt_rewriter": _rewrite_section,
    "mutator/teacher_gap_rewriter": _teacher_section,
    "mutator/llm_workflow_editor": _workflow_step,
}


def rewrite_reply(task_id: str, messages: Sequence[Mapping[str, Any]], *, blind: bool = False) -> str | None:
    """The simulator's reply to a harness-editing request, or None when this is not one.

    An unknown ``mutator/...`` id gets the section treatment when the request has a <current>
    block, else None (the caller then answers as for any other task, i.e. with an error).
    """
    if not task_id.startswith(PREFIX):
        return None
    text = _request_text(messages)
    handler = _HANDLERS.get(task_id)
    if handler is None:
        return _rewrite_section(text, blind) if _block(text, "current") is not None else None
    return handler(text, blind)
