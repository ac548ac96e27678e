"""BFCL's train/dev/holdout assignment: by a seeded hash within strata of the scenario's involved
API classes, so every stratum is spread over the splits in proportion (40/20/40) and no split is
one API's. The assignment is per scenario index and shared by all four categories, which are
variants of one scenario. Pure: classes in, splits out.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence

from evoharness.compiler.runtime.workload import Split

SALT = "bfcl-splits-v1"  # changing it reshuffles every split: a new benchmark, not a new seed
SHARES: tuple[tuple[Split, float], ...] = (("train", 0.4), ("dev", 0.2), ("holdout", 0.4))


def stratum(classes: Sequence[str]) -> str:
    return "+".join(sorted(classes))


def _rank(index: int) -> str:
    return hashlib.sha256(f"{SALT}:{index}".encode()).hexdigest()


def _by_stratum(classes: Mapping[int, Sequence[str]]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for index in classes:
        groups[stratum(classes[index])].append(index)
    return {s: sorted(ix, key=_rank) for s, ix in sorted(groups.items())}


def assign(classes: Mapping[int, Sequence[str]]) -> dict[int, Split]:
    """Scenario index -> split. Within a stratum of n scenarios (in hash order), position p goes to
    the split whose cumulative share first exceeds (p + 0.5) / n: a stratum of one or two lands in
    train first, so every class a later split holds is one train has seen."""
    out: dict[int, Split] = {}
    for members in _by_stratum(classes).values():
        n = len(members)
        for p, index in enumerate(members):
            at, cumulative = (p + 0.5) / n, 0.0
            for split, share in SHARES:
                cumulative += share
                if at < cumulative or split == SHARES[-1][0]:
                    out[index] = split
                    break
    return out


def stratified_order(indices: Sequence[int], classes: Mapping[int, Sequence[str]]) -> list[int]:
    """``indices`` interleaved round-robin across their strata (largest stratum first, hash order
    within), so any prefix is a stratified sample: ``train_limit`` and ``limit`` take one."""
    groups = sorted(_by_stratum({i: classes[i] for i in indices}).values(), key=lambda g: (-len(g), _rank(g[0])))
    order: list[int] = []
    for depth in range(max((len(g) for g in groups), default=0)):
        order.extend(g[depth] for g in groups if depth < len(g))
    return order
