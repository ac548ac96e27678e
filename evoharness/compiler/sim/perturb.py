"""Wrong-but-plausible values: the simulated model's slips of the pen. Deterministic per rng."""
from __future__ import annotations

import random
from typing import Any


def perturb(value: Any, rnd: random.Random) -> Any:
    """A value of the same type that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rnd.choice((-1, 1)) * rnd.choice((1, 1, 10))
    if isinstance(value, float):
        return round(value * rnd.choice((0.9, 1.1)) + rnd.choice((-1.0, 1.0)), 2)
    if isinstance(value, str):
        return perturb_text(value, rnd)
    if isinstance(value, list):
        if not value:
            return ["item"]
        if len(value) > 1 and rnd.random() < 0.5:
            return value[:-1]
        index = rnd.randrange(len(value))
        return [perturb(v, rnd) if i == index else v for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not value:
            return {"key": "value"}
        key = rnd.choice(sorted(value))
        return {k: perturb(v, rnd) if k == key else v for k, v in value.items()}
    return "none" if value is not None else "null"


def perturb_text(text: str, rnd: random.Random) -> str:
    if len(text) < 2:
        return text + "x"
    edits = ("drop", "swap", "case", "suffix")
    for _ in range(4):
        edit = rnd.choice(edits)
        out = text
        if edit == "drop":
            i = rnd.randrange(len(text))
            out = text[:i] + text[i + 1:]
        elif edit == "swap":
            i = rnd.randrange(len(text) - 1)
            out = text[:i] + text[i + 1] + text[i] + text[i + 2:]
        elif edit == "case":
            out = text[0].swapcase() + text[1:]
        else:
            out = text + rnd.choice(("s", "_1", " "))
        if out != text:
            return out
    return text + "_"


def miscopy(text: str, rnd: random.Random) -> str:
    """Copying a value out of a tool result: truncation and transposition dominate."""
    if len(text) >= 6 and rnd.random() < 0.5:
        return text[: max(3, len(text) - rnd.randint(1, 3))]
    return perturb_text(text, rnd)


def can_propagate(value: Any) -> bool:
    """Only distinctive scalars are worth 'copying' from a result."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return len(str(value)) >= 3
    return isinstance(value, str) and len(value) >= 3
