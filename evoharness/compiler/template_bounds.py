"""Bounded work for rendering a template: where Jinja is hooked to spend the render's budget
(template_budget).

Prompt text comes from config files, overrides and registry snapshots, and Jinja2's sandbox bounds
only ``range()``: a nested loop, a repeated string, a wide format field or a branching macro would
hang a compile or take gigabytes. Here a render (its compile too: Jinja folds constant expressions
while compiling) spends one budget of steps, characters and seconds, and every operation that can
build a large value checks the size it would build before building it.
"""
from __future__ import annotations

import functools
import types
from collections import abc
from collections.abc import Callable, Iterable, Iterator
from string import Formatter
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import LoopContext, Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_eval_context
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

from evoharness.compiler.template_budget import (
    MAX_DEPTH,
    bounded,
    built,
    check_bits,
    check_chars,
    check_value,
    counted,
    current_budget,
)
from evoharness.compiler.template_sizes import FILTER_SIZES, MAX_CHARS, METHOD_SIZES, arg, as_size, printf_size, spec_width, text_size


class _Loop:
    """A ``for`` loop's iterable: each item is a step. Keeps ``len()``, so ``loop.length`` copies nothing."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[Any]:
        return counted(self._items)

    def __len__(self) -> int:
        return len(self._items)  # type: ignore[arg-type]  # a TypeError tells LoopContext to count instead


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0  # the context, eval context or environment Jinja passes first
    size, what = FILTER_SIZES.get(name), f"the {name} filter"

    @functools.wraps(func)  # copies jinja_pass_arg, so Jinja still passes it
    def bounded(*args: Any, **kwargs: Any) -> Any:
        current_budget().step()
        if name in ("join", "sum") and len(args) > skip and isinstance(args[skip], abc.Iterator):
            args = (*args[:skip], list(args[skip]), *args[skip + 1:])  # measured before it is used up
        for value in (*args[skip:], *kwargs.values()):
            check_value(what, value)
        if size is not None and len(args) > skip:
            check_chars(what, size(args[skip], args[skip + 1:], kwargs))
        if name == "round":  # it computes 10 ** precision
            precision = arg(args[skip + 1:], kwargs, 0, "precision", 0)
            check_bits(what, abs(precision) * 10 // 3 if isinstance(precision, int) else 0)
        return built(what, func(*args, **kwargs), (*args, *kwargs.values()))

    return bounded


@pass_eval_context
def _join_operands(eval_ctx: Any, operands: list[Any]) -> str:
    """``a ~ b``: Jinja joins the operands with str(), which the sandbox does not see."""
    check_chars("the ~ operator", sum(text_size(x) for x in operands))
    joined = markup_join(operands) if eval_ctx.autoescape else str_join(operands)
    current_budget().build(len(joined))
    return joined


def _concat(pieces: Iterable[str]) -> str:
    """Jinja joins a template's output, a macro's and a block's with this: it stops at the length bound."""
    budget, kept, total = current_budget(), [], 0
    for piece in pieces:
        total += len(piece)
        if total > MAX_CHARS:
            budget.fail(f"the rendered text would be longer than {MAX_CHARS:,} characters")
        budget.tick()
        kept.append(piece)
    budget.build(total)
    return "".join(kept)


def _finalize(value: Any) -> Any:
    check_value("printing a value", value)
    return value


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    check_chars("lipsum()", as_size(n) * (as_size(min if min > max else max) * 16 + 16))  # no lorem ipsum word is longer than 15
    return generate_lorem_ipsum(n, html, min, max)


class BoundedNamespace(Namespace):
    """``namespace()``: each value set on it is checked. Jinja's ``{% set ns.x %}`` only asks isinstance(ns, Namespace)."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        for value in (*args[1:], *kwargs.values()):
            check_value("namespace()", value)
        Namespace.__init__(*args, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        check_value(f"setting namespace attribute {name!r}", value)
        super().__setitem__(name, value)


class _FieldBudget(Formatter):
    """str.format: each field's width and value are checked before Python formats it, and the fields add up."""

    built = 0

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        check_value("str.format()", value)
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.built += text_size(value) + spec_width(format_spec)
        check_chars("str.format()", self.built)
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
            check_bits(what, left.bit_length() * right)
        elif operator == "*" and isinstance(left, int) and isinstance(right, int):
            check_bits(what, left.bit_length() + right.bit_length())
        elif operator == "*" and isinstance(left, int) != isinstance(right, int):
            times, seq = (left, right) if isinstance(left, int) else (right, left)
            if isinstance(seq, abc.Sequence):
                check_chars(what, text_size(seq) * max(times, 0))
        elif operator == "+" and isinstance(left, abc.Sequence) and isinstance(right, abc.Sequence):
            check_chars(what, text_size(left) + text_size(right))
        elif operator == "%" and isinstance(left, str):
            check_chars(what, printf_size(left, right))
        return built(what, super().call_binop(context, operator, left, right), (left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (the sandbox's names)
        budget = current_budget()
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
                check_chars(what, size(owner, args, kwargs))
            elif any(isinstance(x, int) and abs(x) > MAX_CHARS for x in (*args, *kwargs.values())):
                budget.fail(f"{what} is given a number above {MAX_CHARS:,}")  # (1).to_bytes(10**9) and the like
        for value in (*args, *kwargs.values()):
            check_value(what, value)
        budget.depth += 1
        try:
            if budget.depth > MAX_DEPTH:
                budget.fail(f"calls nest deeper than {MAX_DEPTH}")
            result = ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        return built(what, result, (__obj, *args, *kwargs.values()))

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
