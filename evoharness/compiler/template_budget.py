"""One render's budget: the bounds (characters, steps, CPU seconds, integer width, call depth),
the budget every operation of a render (and of its compile) spends, and the checks that refuse a
value before it is built. Where Jinja is hooked to spend it is template_bounds."""
from __future__ import annotations

import time
from collections import abc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from evoharness.compiler.template_sizes import MAX_CHARS, text_size

# MAX_CHARS (template_sizes): no rendered template, and no value one builds, is longer.
# Every value one render builds, added up: bounds the memory of a template that keeps many alive.
MAX_BUILT_CHARS = 20 * MAX_CHARS
# Loop iterations and calls per render: a prompt loops over tens of tools and steps, not millions.
MAX_STEPS = 1_000_000
# A prompt renders in milliseconds: the clock is the backstop for work that no count sees. It is
# this thread's CPU time, so a loaded machine (other processes, other threads) never trips it.
MAX_SECONDS = 2.0
# About 4,200 decimal digits: Python will not print an int of more than 4,300 anyway.
MAX_INT_BITS = 14_000
# Prompts nest a few macros; Python's recursion limit would stop some 150 levels down with a traceback.
MAX_DEPTH = 50

FIX = "render less text: loops, calls and repetitions in prompt templates are bounded (see compiler/template_budget.py)"


class TemplateTooCostly(Exception):
    """A render went past a bound; the message names it. Not a ValueError or TypeError: filters such
    as ``int`` swallow those."""


class Budget:
    def __init__(self) -> None:
        self.steps = self.built = self.depth = 0
        self.deadline = time.thread_time() + MAX_SECONDS
        self.error: str | None = None

    def fail(self, problem: str) -> NoReturn:
        # Sticky: Jinja swallows errors while folding constants at compile time, so the render that
        # follows must fail the same way.
        self.error = self.error or problem
        raise TemplateTooCostly(self.error)

    def tick(self) -> None:
        if self.error:
            raise TemplateTooCostly(self.error)
        if time.thread_time() > self.deadline:
            self.fail(f"rendering took longer than {MAX_SECONDS:g} s of CPU")

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            self.fail(f"more than {MAX_STEPS:,} loop iterations and calls")
        self.tick()

    def build(self, chars: int) -> None:
        self.built += chars
        if self.built > MAX_BUILT_CHARS:
            self.fail(f"the values it builds add up to more than {MAX_BUILT_CHARS:,} characters")


_BUDGET: ContextVar[Budget | None] = ContextVar("template_budget", default=None)


@contextmanager
def bounded() -> Iterator[Budget]:
    """One budget for everything compiled and rendered inside; a nested ``bounded()`` shares it."""
    budget = _BUDGET.get()
    if budget is not None:
        yield budget
        return
    budget = Budget()
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current_budget() -> Budget:
    """The open ``bounded()``'s budget."""
    # Outside bounded() each operation gets a budget of its own: sizes are still checked, totals not.
    return _BUDGET.get() or Budget()


def check_chars(what: str, chars: int) -> None:
    if chars > MAX_CHARS:
        current_budget().fail(f"{what} would build more than {MAX_CHARS:,} characters")


def check_bits(what: str, bits: int) -> None:
    if bits > MAX_INT_BITS:
        current_budget().fail(f"{what} would build an integer wider than {MAX_INT_BITS:,} bits")


def check_value(what: str, value: Any) -> int:
    if isinstance(value, int):
        check_bits(what, value.bit_length())
    size = text_size(value)
    check_chars(what, size)
    return size


def built(what: str, result: Any, inputs: Iterable[Any]) -> Any:
    if isinstance(result, abc.Iterator):
        return counted(result)
    size = check_value(what, result)
    if not isinstance(result, (int, float)) and not any(result is x for x in inputs):
        current_budget().build(size)
    return result


def counted(items: Iterable[Any]) -> Iterator[Any]:
    budget = current_budget()
    for item in items:
        budget.step()
        yield item
