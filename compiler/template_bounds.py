"""Bounded work for rendering a template.

Prompt text comes from config files, overrides and registry snapshots, and Jinja2's sandbox bounds
only ``range()``: a nested loop, a repeated string, a wide format field or a branching macro would
hang a compile or take gigabytes. Here a render (its compile too: Jinja folds constant expressions
while compiling) spends one budget of steps, characters and seconds, and every operation that can
build a large value checks the size it would build before building it.
"""
from __future__ import annotations

import functools
import time
import types
from collections import abc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from string import Formatter
from typing import Any, NoReturn

import jinja2
from evoharness.compiler.template_sizes import FILTER_SIZES, MAX_CHARS, METHOD_SIZES, arg, as_size, printf_size, spec_width, text_size
from jinja2 import nodes
from jinja2.runtime import LoopContext, Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_eval_context
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

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

FIX = "render less text: loops, calls and repetitions in prompt templates are bounded (see compiler/template_bounds.py)"


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


def _budget() -> Budget:
    # Outside bounded() each operation gets a budget of its own: sizes are still checked, totals not.
    return _BUDGET.get() or Budget()


def _check(what: str, chars: int) -> None:
    if chars > MAX_CHARS:
        _budget().fail(f"{what} would build more than {MAX_CHARS:,} characters")


def _check_bits(what: str, bits: int) -> None:
    if bits > MAX_INT_BITS:
        _budget().fail(f"{what} would build an integer wider than {MAX_INT_BITS:,} bits")


def _check_value(what: str, value: Any) -> int:
    if isinstance(value, int):
        _check_bits(what, value.bit_length())
    size = text_size(value)
    _check(what, size)
    return size


def _built(what: str, result: Any, inputs: Iterable[Any]) -> Any:
    if isinstance(result, abc.Iterator):
        return _counted(result)
    size = _check_value(what, result)
    if not isinstance(result, (int, float)) and not any(result is x for x in inputs):
        _budget().build(size)
    return result


def _counted(items: Iterable[Any]) -> Iterator[Any]:
    budget = _budget()
    for item in items:
        budget.step()
        yield item


class _Loop:
    """A ``for`` loop's iterable: each item is a step. Keeps ``len()``, so ``loop.length`` copies nothing."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[Any]:
        return _counted(self._items)

    def __len__(self) -> int:
        return len(self._items)  # type: ignore[arg-type]  # a TypeError tells LoopContext to count instead


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0  # the context, eval context or environment Jinja passes first
    size, what = FILTER_SIZES.get(name), f"the {name} filter"

    @functools.wraps(func)  # copies jinja_pass_arg, so Jinja still passes it
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _budget().step()
        if name in ("join", "sum") and len(args) > skip and isinstance(args[skip], abc.Iterator):
            args = (*args[:skip], list(args[skip]), *args[skip + 1:])  # measured before it is used up
        for value in (*args[skip:], *kwargs.values()):
            _check_value(what, value)
        if size is not None and len(args) > skip:
            _check(what, size(args[skip], args[skip + 1:], kwargs))
        if name == "round":  # it computes 10 ** precision
            precision = arg(args[skip + 1:], kwargs, 0, "precision", 0)
            _check_bits(what, abs(precision) * 10 // 3 if isinstance(precision, int) else 0)
        return _built(what, func(*args, **kwargs), (*args, *kwargs.values()))

    return bounded


@pass_eval_context
def _join_operands(eval_ctx: Any, operands: list[Any]) -> str:
    """``a ~ b``: Jinja joins the operands with str(), which the sandbox does not see."""
    _check("the ~ operator", sum(text_size(x) for x in operands))
    joined = markup_join(operands) if eval_ctx.autoescape else str_join(operands)
    _budget().build(len(joined))
    return joined


def _concat(pieces: Iterable[str]) -> str:
    """Jinja joins a template's output, a macro's and a block's with this: it stops at the length bound."""
    budget, kept, total = _budget(), [], 0
    for piece in pieces:
        total += len(piece)
        if total > MAX_CHARS:
            budget.fail(f"the rendered text would be longer than {MAX_CHARS:,} characters")
        budget.tick()
        kept.append(piece)
    budget.build(total)
    return "".join(kept)


def _finalize(value: Any) -> Any:
    _check_value("printing a value", value)
    return value


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    _check("lipsum()", as_size(n) * (as_size(min if min > max else max) * 16 + 16))  # no lorem ipsum word is longer than 15
    return generate_lorem_ipsum(n, html, min, max)


class BoundedNamespace(Namespace):
    """``namespace()``: each value set on it is checked. Jinja's ``{% set ns.x %}`` only asks isinstance(ns, Namespace)."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        for value in (*args[1:], *kwargs.values()):
            _check_value("namespace()", value)
        Namespace.__init__(*args, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_value(f"setting namespace attribute {name!r}", value)
        super().__setitem__(name, value)


class _FieldBudget(Formatter):
    """str.format: each field's width and value are checked before Python formats it, and the fields add up."""

    built = 0

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        _check_value("str.format()", value)
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.built += text_size(value) + spec_width(format_spec)
        _check("str.format()", self.built)
        return super().format_field(value, format_spec)


class _BoundedFormatter(_FieldBudget, SandboxedFormatter):
    pass


class _BoundedEscapeFormatter(_FieldBudget, SandboxedEscapeFormatter):
    pass


class _Rewrite(NodeTransformer):
    """Every ``for`` counts its items, and ``~`` checks the length of what it joins."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "_bounded_loop", [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), "_bounded_join", [], [], None, None, lineno=node.lineno)


class BoundedTemplate(jinja2.Template):
    def render(self, *args: Any, **kwargs: Any) -> str:
        with bounded():
            return super().render(*args, **kwargs)


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with bounded work: use it inside ``bounded()`` so that compile and render share a budget."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})
    template_class = BoundedTemplate

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_finalize, **options)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters.update(_bounded_loop=_Loop, _bounded_join=_join_operands)
        self.globals.update(namespace=BoundedNamespace, lipsum=_lipsum)
        self.concat = _concat  # type: ignore[assignment]

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = _Rewrite().visit(super()._parse(source, name, filename))
        tree.set_environment(self)
        return tree  # type: ignore[no-any-return]

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        what = f"the {operator} operator"
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            _check_bits(what, left.bit_length() * right)
        elif operator == "*" and isinstance(left, int) and isinstance(right, int):
            _check_bits(what, left.bit_length() + right.bit_length())
        elif operator == "*" and isinstance(left, int) != isinstance(right, int):
            times, seq = (left, right) if isinstance(left, int) else (right, left)
            if isinstance(seq, abc.Sequence):
                _check(what, text_size(seq) * max(times, 0))
        elif operator == "+" and isinstance(left, abc.Sequence) and isinstance(right, abc.Sequence):
            _check(what, text_size(left) + text_size(right))
        elif operator == "%" and isinstance(left, str):
            _check(what, printf_size(left, right))
        return _built(what, super().call_binop(context, operator, left, right), (left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (the sandbox's names)
        budget = _budget()
        budget.step()
        what = f"macro {__obj.name}()" if isinstance(__obj, Macro) else f"{getattr(__obj, '__name__', type(__obj).__name__)}()"
        if isinstance(__obj, LoopContext) and args:  # loop(children) in a recursive for
            args = (_Loop(args[0]), *args[1:])
        owner = getattr(__obj, "__self__", None)
        if isinstance(__obj, types.BuiltinMethodType) and isinstance(owner, (str, bytes, bytearray, int, float)):
            if __obj.__name__ == "join" and args and isinstance(args[0], abc.Iterator):
                args = (list(args[0]), *args[1:])
            size = METHOD_SIZES.get(__obj.__name__)
            if size is not None and isinstance(owner, (str, bytes, bytearray)):
                _check(what, size(owner, args, kwargs))
            elif any(isinstance(x, int) and abs(x) > MAX_CHARS for x in (*args, *kwargs.values())):
                budget.fail(f"{what} is given a number above {MAX_CHARS:,}")  # (1).to_bytes(10**9) and the like
        for value in (*args, *kwargs.values()):
            _check_value(what, value)
        budget.depth += 1
        try:
            if budget.depth > MAX_DEPTH:
                budget.fail(f"calls nest deeper than {MAX_DEPTH}")
            result = ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        return _built(what, result, (__obj, *args, *kwargs.values()))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        # As the sandbox's own, with a formatter that checks each field before formatting it.
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
            return None
        text = value.__self__
        if not isinstance(text, str):
            return None
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                kwargs, args = args[0], ()
            formatter = _BoundedEscapeFormatter(self, escape=text.escape) if isinstance(text, Markup) else _BoundedFormatter(self)
            return type(text)(formatter.vformat(text, args, kwargs))

        return functools.update_wrapper(wrapper, value)
