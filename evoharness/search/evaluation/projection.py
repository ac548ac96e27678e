"""What an evaluation will cost, known before it is paid for: the route's price times the tokens
of the requests the agent is expected to send.

Why prices and token counts rather than a probe (a few tasks run first): a probe is itself paid
work, the very spend a cap is asked to bound before anything runs, and a probe small enough to be
cheap says little about the rest of the split. The request an episode sends first is known
exactly (the compiled system prompt, the tools in the format the route receives, the user's
messages), and so is the price: what is not known is how many calls the model makes and what the
tools answer. The estimate takes the calls a task's reference solution needs (one per reference
call, plus the final answer of each turn) and a history that holds the user's messages and the
model's own calls but none of the tools' answers, so it is a floor of what a model solving the
task pays; a model that wanders pays more. Tasks without a reference count one call per turn.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.runtime.llm import litellm_module
from evoharness.compiler.runtime.prices import Price
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.variant import HarnessVariant


@dataclass(frozen=True)
class CallEstimate:
    """One evaluation's floor, one sample per task."""

    tasks: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float

    @property
    def per_task(self) -> float:
        return self.cost_usd / self.tasks if self.tasks else 0.0


def estimate_evaluation(variant: HarnessVariant, tasks: Iterable[Task], price: Price) -> CallEstimate:
    """The floor of one sample of ``variant`` on ``tasks`` at ``price`` (see the module doc)."""
    counter = _Counter(variant.model.route)
    n = calls = prompt = completion = 0
    for task in tasks:
        n += 1
        for c_prompt, c_completion in _task_calls(variant, task, counter):
            calls += 1
            prompt += c_prompt
            completion += c_completion
    return CallEstimate(tasks=n, calls=calls, prompt_tokens=prompt, completion_tokens=completion,
                        cost_usd=price.of(prompt, completion))


def _task_calls(variant: HarnessVariant, task: Task, counter: _Counter) -> list[tuple[int, int]]:
    """(prompt tokens, completion tokens) of each call the task's reference solution takes."""
    offered = [n for n in task.tool_names if any(t.name == n for t in variant.tools)]
    history: list[dict[str, Any]] = []
    out: list[tuple[int, int]] = []
    for turn, messages in enumerate(task.turns):
        offered += [n for n in task.added_tools.get(turn, ()) if n not in offered and any(t.name == n for t in variant.tools)]
        history += [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in messages]
        base = counter.prompt(variant.system_prompt_for(offered), history, variant.native_tools_for(offered))
        gold = task.gold[turn] if turn < len(task.gold) else ()
        answer = str(task.answers[turn] or "") if turn < len(task.answers) else ""
        said = 0  # the model's own earlier calls of this turn are in every later request's history
        for call in gold:
            text = json.dumps({"name": call.name, "arguments": dict(call.arguments)}, sort_keys=True, default=str)
            tokens = counter.text(text)
            out.append((base + said, tokens))
            said += tokens
        out.append((base + said, counter.text(answer)))
        history.append({"role": "assistant", "content": answer})
    return out


class _Counter:
    """litellm's tokenizer for the route (tiktoken's for a model it does not know), memoised on the
    request: a workload's tasks share their prompt and tools."""

    def __init__(self, route: str) -> None:
        self.route, self.lm = route, litellm_module()
        self._prompts: dict[str, int] = {}
        self._texts: dict[str, int] = {}

    def text(self, text: str) -> int:
        if text and text not in self._texts:
            self._texts[text] = int(self.lm.token_counter(model=self.route, text=text))
        return self._texts.get(text, 0)

    def prompt(self, system: str, history: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> int:
        head = json.dumps([system, list(tools)], sort_keys=True, default=str)
        if head not in self._prompts:
            self._prompts[head] = int(self.lm.token_counter(model=self.route, messages=[{"role": "system", "content": system}],
                                                            tools=list(tools) or None))
        return self._prompts[head] + sum(self.text(m["content"]) + 4 for m in history)  # 4: a message's framing
