"""Which response surface the simulator plays: the documented one, or a blind one drawn from a seed.

The documented surface is the formula docs/sim-model.md tables: "verify" makes a step a review step,
any rule line naming a tool counts, ``Example:`` marks an example, and each cue's effect is a fixed
number. A harness search tuned on it can win by knowing those words. A blind surface draws, from its
``surface_seed`` and within ranges the model card documents, the cue vocabulary (which words make a
step a review step, which make a rule line count, which mark an example), the size of each cue's
effect, and which edit kinds hurt (a procedure that raises premature stops, rules that do, a long
prompt whose length costs more than its content helps). A search that finds the gain on many blind
surfaces found it from evidence, not from our wording. Only the simulator reads this module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from evoharness.compiler.sim.rng import rng

SurfaceKind = Literal["documented", "blind"]

# Plain instruction English: the pools a blind surface draws its live cues from. Any harness text
# may use these words; which of them the simulated model responds to is the surface's secret.
REVIEW_POOL = ("verify", "check", "review", "confirm", "double-check", "inspect", "validate", "re-read",
               "compare", "make sure", "look over", "examine")
RULE_POOL = ("exactly", "always", "never", "must", "copy", "exact", "only", "careful", "carefully",
             "precisely", "verbatim", "character", "required", "before", "do not", "make sure")
EXAMPLE_POOL = ("example:", "examples:", "e.g.", "for example", "for instance", "sample call", "usage:", "such as")

# The ranges a blind surface draws from (the model card's "Blind surfaces" table).
RANGES = {
    "rule_tool": (0.5, 1.0), "rule_arg": (0.2, 0.8), "example": (0.5, 1.0), "procedure": (0.6, 1.3),
    "catch_scale": (0.3, 1.0), "length_slope": (0.05, 0.6), "rule_stop": (0.02, 0.08),
}
REVIEW_CUES = 2  # live review words per blind surface
RULE_CUES = 3  # live rule words, unless the surface lets any rule line count
ANY_RULE_P = 0.25  # chance that every rule line naming a tool counts (as on the documented surface)
RULE_STOP_P = 0.5  # chance that counted rules raise premature stops
EXAMPLE_MARKERS = 2
RULE_STOP_CAP = 10  # counted rule lines beyond this add no further stop risk


@dataclass(frozen=True)
class Surface:
    """One response surface: its cue vocabulary and effect sizes."""

    name: str  # "documented" or "blind:<seed>"
    review_cues: tuple[str, ...]  # a step whose name or text holds one of these is a review step
    rule_cues: tuple[str, ...]  # a rule line counts only if it holds one of these; () = any line counts
    example_markers: tuple[str, ...]  # a line starting with one of these (after a bullet) is an example
    rule_tool: float  # factor on wrong_tool / skip_read for a counted rule naming the tool
    rule_arg: float  # factor on wrong_value / propagation for a counted rule naming tool and argument
    example: float  # factor for an example naming the tool
    procedure: float  # premature-stop factor of a ## Procedure with a step (above 1: it hurts)
    catch_scale: float  # a review step catches each mistake with P = tier.catch x this
    length_slope: float  # common factor's slope per doubling of (1 + prompt tokens / 1000)
    rule_stop: float  # premature_stop x (1 + rule_stop x counted rule lines, capped)
    redo_exact: bool  # a redone call is always correct (documented) or drawn like any call (blind)

    def is_review(self, name: str, instructions: str = "") -> bool:
        text = f"{name} {instructions}".lower()
        if self.name == "documented":  # the card's rule: the word anywhere, "verifying" included
            return any(cue in text for cue in self.review_cues)
        return any(_holds(text.replace("_", " "), cue) for cue in self.review_cues)

    def counts_as_rule(self, line: str) -> bool:
        return not self.rule_cues or any(_holds(line.lower(), cue) for cue in self.rule_cues)

    def is_example(self, line: str) -> bool:
        text = re.sub(r"^\s*(?:[-*]\s*)?", "", line).lower()
        return any(text.startswith(marker) for marker in self.example_markers)


def _holds(text: str, cue: str) -> bool:
    """Whole-word (or whole-phrase) match, so 'check' is in 'double-check' and 'check_arguments'
    (underscores read as spaces) but 'exact' is not in 'exactly'."""
    return re.search(rf"(?<![a-z]){re.escape(cue)}(?![a-z])", text) is not None


DOCUMENTED = Surface(
    name="documented", review_cues=("verify",), rule_cues=(), example_markers=("example:", "examples:"),
    rule_tool=0.7,  # a rule line naming the tool
    rule_arg=0.35,  # a rule line naming the tool and the argument
    example=0.7,  # an example line naming the tool
    procedure=0.7,  # a ## Procedure section with at least one step (premature stops only)
    catch_scale=1.0, length_slope=0.10,  # +10% per doubling of (1 + prompt_tokens/1000)
    rule_stop=0.0, redo_exact=True,
)


@lru_cache(maxsize=64)
def blind_surface(seed: int) -> Surface:
    """The blind surface of ``seed``: a pure function of it."""
    r = rng("surface", "blind", seed)

    def draw(name: str) -> float:
        lo, hi = RANGES[name]
        return round(r.uniform(lo, hi), 3)

    review = tuple(sorted(r.sample(REVIEW_POOL, REVIEW_CUES)))
    rules = () if r.random() < ANY_RULE_P else tuple(sorted(r.sample(RULE_POOL, RULE_CUES)))
    examples = tuple(sorted(r.sample(EXAMPLE_POOL, EXAMPLE_MARKERS)))
    effects = {name: draw(name) for name in ("rule_tool", "rule_arg", "example", "procedure", "catch_scale", "length_slope")}
    rule_stop = draw("rule_stop") if r.random() < RULE_STOP_P else 0.0
    return Surface(name=f"blind:{seed}", review_cues=review, rule_cues=rules, example_markers=examples,
                   rule_stop=rule_stop, redo_exact=False, **effects)


def surface_for(kind: str, seed: int) -> Surface:
    if kind == "documented":
        return DOCUMENTED
    if kind == "blind":
        return blind_surface(seed)
    raise ValueError(f"surface={kind!r} is not a simulator surface; use 'documented' or 'blind'")
