"""Hash-keyed random draws: every decision gets its own named uniform.

Keying each draw by what it decides (task, turn, gold call, error kind) rather than by a running
stream makes every decision reproducible. By default the key also holds a digest of what the
harness sends (model, system prompt, tools, temperature): two variants get independent noise, as
two prompts do on a real model. With shared draws (``SimConfig.shared_draws``) the digest is left
out, so variants share random numbers: an error happens iff its uniform falls below its
probability, and a better-documented harness can only remove errors for the same (task, seed,
sample), never reshuffle them. That low-variance, per-task monotone surface is what a benchmark
needs to enumerate a true front; it overstates how well real comparisons separate variants.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

_SEP = "\x1f"


def _digest(parts: tuple[object, ...]) -> bytes:
    return hashlib.sha256(_SEP.join(str(p) for p in parts).encode("utf-8")).digest()


def uniform(*parts: object) -> float:
    """A uniform in [0, 1) that depends only on ``parts`` (never on Python's salted ``hash``)."""
    return int.from_bytes(_digest(parts)[:8], "big") / 2.0**64


def rng(*parts: object) -> random.Random:
    """A private generator for choices that need more than one draw (perturbations, text)."""
    return random.Random(int.from_bytes(_digest(parts)[:16], "big"))


def digest_hex(*parts: object, length: int = 16) -> str:
    return _digest(parts).hex()[:length]


@dataclass(frozen=True)
class Draws:
    """Named draws for one (task, request seed, turn), and the harness unless shared.

    ``seed`` is the request's own ``seed`` parameter, None at temperature 0: greedy decoding does
    not depend on it, so every sample replays the same trajectory, as on a provider.
    """

    task_id: str
    seed: int | None
    turn: int
    harness: str | None = None  # digest of what the variant sends; None = shared across variants
    world: int = 0  # SimConfig.world: a benchmark's replicate, never sent by the harness

    def _key(self) -> tuple[object, ...]:
        base = ("sim", self.world, self.task_id, self.seed, self.turn)
        return base if self.harness is None else (*base, self.harness)

    def u(self, kind: str, *parts: object) -> float:
        return uniform(*self._key(), kind, *parts)

    def rng(self, kind: str, *parts: object) -> random.Random:
        return rng(*self._key(), kind, *parts)
