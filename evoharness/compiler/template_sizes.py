"""How many characters a template operation would build, worked out before it builds them.

template_bounds refuses an operation whose result would pass MAX_CHARS; this module says how big
that result would be: the length a value prints as, the length of a ``%`` or ``str.format`` result
from its widths, and the result of each filter and str method that can build more than it is given.
The estimates err high, never low by more than a small constant factor.
"""
from __future__ import annotations

import re
from collections import abc
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jinja2.runtime import Undefined
from jinja2.utils import Namespace

# A prompt longer than this would not fit a model's context window, so neither a rendered template
# nor any value it builds (a string, or a list or mapping as it would print) may be longer.
MAX_CHARS = 1_000_000


def shape(value: Any, limit: int = MAX_CHARS) -> tuple[int, int]:
    """About how many characters ``value`` prints as, and how deep it nests. Every item counts at
    least one character and the walk stops past ``limit``, so it is cheap whatever the sharing."""
    if isinstance(value, str):  # the common cases, without the walk
        return len(value), 0
    if isinstance(value, int):
        return value.bit_length() * 31 // 100 + 1, 0
    if isinstance(value, float) or value is None:
        return 30, 0
    size = depth = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and size <= limit:
        for item in stack[-1]:
            size += 2
            children: Iterable[Any] | None = None
            if isinstance(item, str):
                size += len(item)
            elif isinstance(item, int):
                size += item.bit_length() * 31 // 100
            elif isinstance(item, (bytes, bytearray)):
                size += 4 * len(item)
            elif isinstance(item, range):
                size += len(item) * (2 + max(abs(item.start), abs(item.stop)).bit_length() * 31 // 100)
            elif isinstance(item, Namespace):
                children = object.__getattribute__(item, "_Namespace__attrs").items()
            elif isinstance(item, abc.Mapping):
                children = item.items()
            elif isinstance(item, (Undefined, abc.Iterator)):
                pass  # an iterator's items are counted as they are drawn
            elif isinstance(item, abc.Collection):
                children = item
            else:
                size += 30  # a float, None, or an object from the caller's context
            if children is not None:
                stack.append(iter(children))
                depth = max(depth, len(stack) - 1)
                break
            if size > limit:
                break
        else:
            stack.pop()
    return size, depth


def text_size(value: Any) -> int:
    return shape(value)[0]


def arg(args: Any, kwargs: Any, i: int, name: str, default: Any = None) -> Any:
    """An operation's argument, passed by position (after the value) or by name."""
    return kwargs[name] if name in kwargs else args[i] if len(args) > i else default


def as_size(value: Any) -> int:
    """An argument used as a width or count; anything but an int or str fails in the operation itself."""
    return max(value, 0) if isinstance(value, int) else len(value) if isinstance(value, str) else 0


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, bytearray)) else text_size(value)


def _lines(s: Any) -> int:
    return s.count("\n") + 1 if isinstance(s, str) else text_size(s)


def _words(s: Any) -> int:
    return len(s.split()) + 1 if isinstance(s, str) else text_size(s)


def _replace_size(s: Any, old: Any, new: Any, count: Any) -> int:
    try:
        hits = s.count(old) if old and isinstance(s, (str, bytes, bytearray)) else _length(s) + 1
    except TypeError:
        hits = 0  # old is of the wrong type: replace() itself fails
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return _length(s) + hits * _length(new)


def _join_size(items: Any, sep: Any) -> int:
    return text_size(items) + _length(sep) * max(len(items) - 1 if isinstance(items, abc.Sized) else 0, 0)


def printf_size(fmt: str, values: Any) -> int:
    """The length of ``fmt % values``, from its conversion specs, widths and precisions."""
    positional = values if isinstance(values, tuple) else (values,)
    mapping = values if isinstance(values, abc.Mapping) else {}
    total, i, pos = 0, 0, 0

    def number() -> int:  # a width or precision: digits, or * to take the next value
        nonlocal i, pos
        if fmt.startswith("*", i):
            i, pos = i + 1, pos + 1
            return as_size(positional[pos - 1]) if pos <= len(positional) else 0
        digits = re.match(r"\d*", fmt[i:i + 12]).group()  # type: ignore[union-attr]
        i += len(digits)
        return MAX_CHARS + 1 if len(digits) > 9 else int(digits or 0)

    while total <= MAX_CHARS and (j := fmt.find("%", i)) >= 0:
        total, i, value, keyed = total + j - i, j + 1, None, False
        if fmt.startswith("(", i):  # a key, with nested parentheses as Python reads them
            depth, k = 1, i + 1
            while k < len(fmt) and depth:
                depth += {"(": 1, ")": -1}.get(fmt[k], 0)
                k += 1
            value, keyed, i = mapping.get(fmt[i + 1:k - 1]), True, k
        while fmt[i:i + 1] in ("-", "+", " ", "#", "0"):
            i += 1
        width, precision = number(), 0
        if fmt.startswith(".", i):
            i += 1
            precision = number()
        while fmt[i:i + 1] in ("h", "l", "L"):
            i += 1
        kind, i = fmt[i:i + 1], i + 1
        if kind == "%":
            total += max(width, 1)
            continue
        if not keyed:
            value, pos = (positional[pos] if pos < len(positional) else None), pos + 1
        size = text_size(value) if kind in "sra" else _length(value) + precision + (330 if isinstance(value, float) else 2)
        total += max(width, min(size, precision) if kind == "s" and precision else size)
    return total + len(fmt) - i if total <= MAX_CHARS else total


def spec_width(spec: str) -> int:
    """What a ``str.format`` spec can add to a field: its width and precision, counted generously."""
    runs = re.findall(r"\d+", spec)
    return MAX_CHARS + 1 if any(len(r) > 9 for r in runs) else sum(int(r) for r in runs)


def _sum_size(v: Any, a: Any, k: Any) -> int:
    start = arg(a, k, 1, "start", 0)  # adding up lists copies the total so far each time
    return 0 if isinstance(start, (int, float)) else text_size(v) * max(len(v) if isinstance(v, abc.Sized) else 1, 1)


def _tojson_size(v: Any, a: Any, k: Any) -> int:
    size, depth = shape(v)
    indent = arg(a, k, 0, "indent")  # each line is indented once per level; \uXXXX escapes are 6 characters
    return 6 * size + (size * (1 + as_size(indent) * depth) if indent is not None else 0)


def _pprint_size(v: Any, a: Any, k: Any) -> int:
    size, depth = shape(v)
    return size * (2 + depth)


def _longest_entry(table: Any) -> int:
    # str.translate maps each character to a table entry, which may be a long string
    entries = table.values() if isinstance(table, abc.Mapping) else table if isinstance(table, (list, tuple)) else ()
    return max([1, *(text_size(x) for x in entries)])


def _fill_size(fill: Any) -> int:
    return 2 if fill is None else text_size(fill) + 2


# Filters that can build more than they are given: (value, args after it, kwargs) -> characters.
FILTER_SIZES: dict[str, Callable[[Any, Any, Any], int]] = {
    "center": lambda v, a, k: max(text_size(v), as_size(arg(a, k, 0, "width", 80))),
    "indent": lambda v, a, k: text_size(v) + _lines(v) * as_size(arg(a, k, 0, "width", 4)),
    "replace": lambda v, a, k: _replace_size(v if isinstance(v, str) else str(v), arg(a, k, 0, "old"), arg(a, k, 1, "new"),
                                             arg(a, k, 2, "count")),
    "join": lambda v, a, k: _join_size(v, arg(a, k, 0, "d", "")),
    "wordwrap": lambda v, a, k: text_size(v) + (text_size(v) // max(as_size(arg(a, k, 0, "width", 79)), 1) + _words(v))
    * _length(arg(a, k, 2, "wrapstring") or "\n"),
    "batch": lambda v, a, k: text_size(v) + as_size(arg(a, k, 0, "linecount")) * _fill_size(arg(a, k, 1, "fill_with")),
    "slice": lambda v, a, k: text_size(v) + as_size(arg(a, k, 0, "slices")) * (2 + _fill_size(arg(a, k, 1, "fill_with"))),
    "format": lambda v, a, k: printf_size(v if isinstance(v, str) else str(v), k or tuple(a)),
    "urlize": lambda v, a, k: 3 * text_size(v) + _words(v) * (text_size(arg(a, k, 2, "target")) + text_size(arg(a, k, 3, "rel")) + 60),
    "tojson": _tojson_size, "pprint": _pprint_size, "sum": _sum_size,
}

# Methods of str and bytes that can: (the string, args, kwargs) -> characters.
METHOD_SIZES: dict[str, Callable[[Any, Any, Any], int]] = {
    **dict.fromkeys(("center", "ljust", "rjust", "zfill"), lambda s, a, k: max(len(s), as_size(arg(a, k, 0, "width")))),
    "expandtabs": lambda s, a, k: len(s) + s.count("\t" if isinstance(s, str) else b"\t") * as_size(arg(a, k, 0, "tabsize", 8)),
    "replace": lambda s, a, k: _replace_size(s, arg(a, k, 0, "old"), arg(a, k, 1, "new"), arg(a, k, 2, "count")),
    "join": lambda s, a, k: _join_size(a[0] if a else (), s),
    "translate": lambda s, a, k: len(s) * _longest_entry(arg(a, k, 0, "table")),
}
