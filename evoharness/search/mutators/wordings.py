"""The phrase pools of the offline mutators: several wordings of each step kind, rule and
sentence, so that what a mutator proposes is chosen by its evidence (which kind, which tool and
argument) and its rng (which wording), never a fixed text.

Every wording of a group says the same thing; a group counts as present in a text when any of its
wordings is, so a mutator never adds a second wording of what a text already says. Pure data and
two small helpers; nothing here reads a context.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Group = tuple[str, ...]  # wordings of one sentence, interchangeable


def choose(rng: random.Random, options: Sequence[str], taken: Iterable[str] = ()) -> str | None:
    """One of ``options`` not in ``taken``, drawn with ``rng``; None when every one is taken."""
    taken = set(taken)
    free = [o for o in options if o not in taken]
    return rng.choice(free) if free else None


def present(text: str, group: Iterable[str]) -> bool:
    """Whether ``text`` already holds any wording of ``group``."""
    return any(w in text for w in group)


# -- workflow step kinds --------------------------------------------------------------------

@dataclass(frozen=True)
class StepKind:
    """A kind of workflow step: what it is for, names for it, and ways of saying it.

    Attributes:
        label: What the step does, for notes.
        names: Step names for it; the step is named by one of them, drawn with the rng.
        wordings: (trigger, instructions) pairs; ``prompt`` steps are read with the procedure,
            ``before_final`` ones are also sent once before a turn's final answer.
    """

    label: str
    names: tuple[str, ...]
    wordings: tuple[tuple[str, str], ...]


STEP_KINDS: dict[str, StepKind] = {
    "arguments": StepKind("argument check", ("check_arguments", "argument_check", "source_each_argument", "match_argument_values"), (
        ("prompt", "Before each call, check that every required argument has a value taken from the request "
                   "or an earlier tool result, and that no argument is passed that the request gives no value for."),
        ("prompt", "Before each tool call, find where each argument value is stated (the user's request or an earlier tool "
                   "result) and copy it exactly as written, with nothing shortened, rounded or guessed."),
        ("before_final", "Before your final answer, re-read the arguments of every call you made this turn against the request "
                         "and the tool results; if a value was wrong, copied inexactly or left out, make the call again correctly."),
        ("before_final", "Before your final answer, verify each call's argument values against where they came from; "
                         "redo any call whose values do not match."),
    )),
    "completion": StepKind("completion check", ("confirm_done", "completion_check", "cover_every_action", "finish_the_request"), (
        ("before_final", "Before your final answer, make sure every action the user asked for has been done; "
                         "if one is missing, do it now."),
        ("before_final", "Before answering, go through the request part by part and match each part to a call you made; "
                         "make any call still missing first."),
        ("before_final", "Do not answer while any requested action is still outstanding: review what was asked, "
                         "and make the remaining calls before the final answer."),
        ("before_final", "Before your final answer, verify that each part of the request has its tool call; "
                         "if a part has none, make that call now."),
    )),
    "look_first": StepKind("look before writing", ("look_before_writing", "inspect_state_first", "read_before_write"), (
        ("prompt", "Before any call that changes something, look at the current state with a call that only reads, "
                   "and base the change on what it shows."),
        ("prompt", "Inspect before you change: read the relevant state (list, get or status calls) before any call "
                   "that modifies it, and take the write's arguments from that result."),
        ("prompt", "First look, then act: when the request involves a change, make the reading calls that show "
                   "the current state before making the change."),
    )),
    "plan": StepKind("plan", ("plan_calls", "plan_first", "outline_calls", "choose_tools_first"), (
        ("prompt", "Before the first call, list the tool calls the request needs, in order, "
                   "and where each argument value comes from."),
        ("prompt", "Plan first: decide which offered tool does each part of the request, in order; "
                   "make no call the plan does not need."),
        ("prompt", "Before calling anything, write down the calls the request needs and the tool each one uses; "
                   "use only the tools offered and skip those the request does not need."),
    )),
    "recovery": StepKind("error recovery", ("recover_from_errors", "retry_failed_calls", "fix_and_retry"), (
        ("prompt", "After a call returns an error, read the error, fix what it names in the call's arguments "
                   "and make the call again before moving on."),
        ("prompt", "When a tool reports a failure, do not go on as if it had succeeded: correct the call "
                   "and retry it until it succeeds or the error says it cannot."),
        ("before_final", "Before your final answer, look back at every call that failed this turn; if one was never "
                         "redone successfully, fix its arguments and call it again."),
    )),
}
# Which step kind addresses a failure kind. A missed call to a tool that only reads is a skipped
# look at the state (``look_first``); the step-choosing code decides that from the tool's spec.
STEP_FOR_FAILURE = {
    "wrong_value": "arguments", "propagation": "arguments", "missing_argument": "arguments", "extra_argument": "arguments",
    "premature_stop": "completion", "missed_call": "completion",
    "wrong_tool": "plan", "unneeded_call": "plan", "forbidden_tool": "plan", "unknown_tool": "plan",
    "no_recovery": "recovery",
}


# -- mined rules: {t} the tool, {a} the argument ----------------------------------------------

RULES: dict[str, Group] = {
    "propagation": (
        "When calling `{t}`, copy `{a}` character for character from the tool result it comes from; never shorten or retype it.",
        "Take `{a}` for `{t}` verbatim from the earlier tool result that holds it, with nothing dropped or changed.",
        "For `{t}`, paste `{a}` exactly as an earlier tool result gave it; do not abbreviate or retype it."),
    "wrong_value": (
        "When calling `{t}`, take `{a}` exactly from the user's request or the latest tool result; do not round, reformat or guess it.",
        "The value of `{a}` in a `{t}` call must be the one the user or a tool result gave, unchanged; never infer or round it.",
        "Before calling `{t}`, find where `{a}` is stated in the request or a tool result and use that value as written."),
    "missing_argument": (
        "When calling `{t}`, always pass `{a}`; take its value from the user's request or the latest tool result.",
        "Every call to `{t}` needs `{a}`: include it, with the value the request or a tool result gives.",
        "Do not leave `{a}` out of a `{t}` call; fill it from the user's request or an earlier tool result."),
    "extra_argument": (
        "When calling `{t}`, pass `{a}` only when the user's request gives a value for it.",
        "Leave `{a}` out of `{t}` calls unless the request supplies its value.",
        "Include `{a}` in a call to `{t}` only when the user has asked for it; otherwise omit it."),
    "no_recovery": (
        "If `{t}` returns an error, read it, fix the arguments and call `{t}` again before answering.",
        "When a call to `{t}` fails, correct what the error points to and repeat the call; do not answer until it succeeds.",
        "An error from `{t}` means the call must be redone: change the arguments the error names and call `{t}` again."),
    "wrong_tool": (
        "Use `{t}` for what it does; do not substitute another tool for it.",
        "When the request needs what `{t}` does, call `{t}` itself, not a tool that looks similar.",
        "No other tool stands in for `{t}`: pick it whenever its job is what the request asks."),
    "premature_stop": (
        "Do not give the final answer while the request still needs `{t}`; call it first.",
        "When the request needs `{t}`, answer only after `{t}` has run.",
        "If the request calls for `{t}`, make that call before writing the final answer."),
    "missed_call": (
        "Call `{t}` whenever the request needs what it does; do not skip it or answer before it has run.",
        "Never skip `{t}` when the request depends on it; make the call even if the answer seems known.",
        "When part of the request is the job of `{t}`, call `{t}` for it; do not leave that part out."),
    "unneeded_call": (
        "Call `{t}` only when the request asks for what it does; never call it by default.",
        "Do not call `{t}` unless the request needs it.",
        "Leave `{t}` alone unless the request needs its result or its change."),
    "forbidden_tool": (
        "Call only the tools offered; `{t}` is not one of them.",
        "`{t}` is not available here: use the offered tools only.",
        "Never call `{t}`; it is not among the tools offered."),
}

# tool_rule_add's rule groups, {t} the tool and {r} " (`a`, `b`)" listing its required arguments or ""
TOOL_RULES: dict[str, Group] = {
    "arguments": (
        "Before calling `{t}`, make sure every required argument{r} has a value from the user's request or an earlier tool result.",
        "Each call to `{t}` needs all of its required arguments{r}, each taken from the request or an earlier tool result.",
        "Fill every required argument of `{t}`{r} from the user's request or a tool result before calling it."),
    "recovery": (
        "If `{t}` returns an error, fix the arguments and call it again before answering.",
        "After an error from `{t}`, correct the call and repeat it before you answer.",
        "A failed `{t}` call is not the end: read its error, fix the arguments and try again."),
    "restraint": (
        "Call `{t}` only when the request needs what it does.",
        "Leave `{t}` uncalled unless the request needs it.",
        "Use `{t}` only for requests that need its result or its change."),
    "needed": (
        "When the request needs what `{t}` does, call it; do not answer without it.",
        "Make the `{t}` call whenever the request depends on it, before the final answer.",
        "Do not skip `{t}` when its job is part of the request."),
}
TOOL_RULE_FOR_FAILURE = {"no_recovery": "recovery", "unneeded_call": "restraint", "forbidden_tool": "restraint",
                         "unknown_tool": "restraint", "missed_call": "needed", "premature_stop": "needed", "wrong_tool": "needed"}


# -- sentences for prompt sections ------------------------------------------------------------

GENERIC_SENTENCES: tuple[Group, ...] = (
    ("Copy every argument value exactly from the user's request or an earlier tool result.",
     "Use argument values exactly as the request or an earlier tool result gives them.",
     "Take each argument value word for word from the request or a tool result."),
    ("Make one tool call at a time and read its result before the next call.",
     "Call one tool at a time, and look at each result before deciding on the next call.",
     "Wait for each tool result before making the next call."),
    ("If a tool call fails, read the error, fix the call and try again.",
     "When a call returns an error, correct the call and make it again.",
     "Treat a tool error as a reason to fix the call and retry it."),
    ("Finish every action the request asks for before you answer.",
     "Answer only once every action the request asks for is done.",
     "Complete all the requested actions before giving the final answer."),
    ("Never guess a value the user did not give; ask for it instead.",
     "If a needed value is missing, ask the user rather than guessing it.",
     "Do not invent values: ask the user for any value the request leaves out."),
    ("Keep the final answer brief.", "Keep the final answer short.", "Give a final answer of a sentence or two."),
)
SENTENCES: dict[str, tuple[Group, ...]] = {  # per section role; others get GENERIC_SENTENCES
    "style": (
        ("Keep the final answer brief.", "Keep the final answer short.", "Give a final answer of a sentence or two."),
        ("Do not repeat tool output verbatim; say what changed.", "Say what changed instead of pasting tool output.",
         "Report the outcome of the calls, not their raw output."),
        ("Answer in one short sentence once the calls are done.", "Once the calls are done, answer in a single sentence.",
         "After the last call, reply with one sentence."),
    ),
}
CLARITY: dict[str, tuple[Group, ...]] = {  # per section role
    "rules": (
        ("Each rule in this section is mandatory; follow them in the order given.",
         "Every rule here applies; follow them in the order listed.",
         "Treat each rule in this section as required, in the order given."),
        ("When a rule here conflicts with a habit, follow the rule.", "If a habit and a rule here disagree, the rule wins.",
         "Follow these rules even where habit suggests otherwise."),
    ),
    "identity": (("Complete each request fully with the tools before you answer.",
                  "Use the tools to finish each request completely before answering.",
                  "Carry each request through with the tools before you reply."),),
    "style": (("Summarise what changed instead of restating tool results in full.",
               "Describe the change rather than restating tool results.",
               "State what changed; do not restate the tool results in full."),),
}
CLARITY_ANY: tuple[Group, ...] = (("Apply every instruction in this section on every turn.",
                                    "Every instruction in this section holds on every turn.",
                                    "Follow all of this section's instructions on each turn."),)


# -- argument clarifications: {a} the argument, {n} required/optional, {d} its description, {k} its type

CLARIFY_ARTICLE: Group = ("Argument `{a}` is {n}; it is {d}.", "`{a}` ({n}) is {d}.", "The {n} argument `{a}` is {d}.")
CLARIFY_TEXT: Group = ("Argument `{a}` is {n}: {d}.", "`{a}` ({n}): {d}.", "The {n} argument `{a}`: {d}.")
CLARIFY_BARE: Group = ("Argument `{a}` is {n}; give it as {k} taken from the user's request or an earlier tool result.",
                       "`{a}` ({n}) is {k}; take it from the user's request or an earlier tool result.",
                       "Give the {n} argument `{a}` as {k} from the request or an earlier tool result.")
