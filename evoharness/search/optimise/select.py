"""Which front members get a dev run, which one is the champion, each round's winner and the
ledger's decision on every trial. Pure: records in, choices out."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from evoharness.search.evaluation.decision import DevCandidate, Evidence, noninferior_pick
from evoharness.search.optimise.study import TrialRecord

Standing = Literal["champion", "front", "dominated", "infeasible", "failed"]


def distinct_front(front: Sequence[TrialRecord], quality: str) -> list[TrialRecord]:
    """One member per variant (controls and re-enqueues evaluate the same variant again), best
    train quality first; among equal variants the best-scoring evaluation is kept."""
    unique: dict[str, TrialRecord] = {}
    for t in sorted(front, key=lambda t: -t.quality(quality)):
        unique.setdefault(t.variant_hash, t)
    return list(unique.values())


def dev_picks(count: int, cap: int) -> list[int]:
    """Indices of the members re-evaluated on dev, out of ``count`` ordered from best quality to
    cheapest: all when they fit, else ``cap`` evenly spaced ones so dev sees the whole front."""
    cap = max(1, cap)
    if count <= cap:
        return list(range(count))
    if cap == 1:
        return [0]
    return sorted({round(i * (count - 1) / (cap - 1)) for i in range(cap)})


def dev_members(costs: Sequence[float], cap: int, *, qualifies: Sequence[bool] | None = None, best_quality: bool = False) -> list[int]:
    """Indices of the front members (ordered best train quality first, with their train costs)
    re-evaluated on dev: all when they fit, else ``cap`` spread evenly along the cost axis, the
    cheapest always among them (what a non-inferiority rule needs) and the best quality (index 0)
    in place of the dearest pick. With three objectives quality order is not cost order, so
    spacing by quality rank alone could skip the cheapest member.

    ``qualifies`` (a non-inferiority rule: cheaper or faster than the reference and within the
    margin of its train quality) sends the dev runs to the members that can win first: the best quality, then
    the cheapest qualifying ones; the spread fills what is left. A member far below the bar on
    train is the last that needs a dev run.

    ``best_quality`` (a rule that crowns the best dev quality): the ``cap`` best on train. The
    cheap end of the front is there for its cost, which such a rule does not weigh, and a dev run
    spent on it is one the dearer, better edits do not get."""
    count = len(costs)
    if count <= max(1, cap) or best_quality:
        return list(range(min(count, max(1, cap))))
    if qualifies is not None and any(qualifies[1:]):
        ok = sorted((i for i in range(1, count) if qualifies[i]), key=lambda i: (costs[i], i))[: max(1, cap) - 1]
        rest = sorted((i for i in dev_members(costs, cap) if i not in ok and i != 0), key=lambda i: (costs[i], i))
        return sorted({0, *ok, *rest[: max(0, cap - 1 - len(ok))]})
    by_cost = sorted(range(count), key=lambda i: (costs[i], i))
    picks = [by_cost[i] for i in dev_picks(count, cap)]
    if 0 not in picks:
        picks[-1] = 0  # the dearest pick gives way to the best quality
    return sorted(set(picks))


def champion_index(rank_keys: Sequence[tuple[float, ...]]) -> int:
    """The member with the largest rank key (criteria.rank_key); the first of equals wins, so the
    order of the candidates (best train quality first) breaks exact ties."""
    if not rank_keys:
        raise ValueError("no ranked candidate to choose a champion from")
    return max(range(len(rank_keys)), key=lambda i: rank_keys[i])


def cheapest_noninferior(candidates: Sequence[DevCandidate], *, reference: float, margin: float,
                         reference_cost: float = float("inf")) -> tuple[int, Evidence] | None:
    """The cheapest feasible candidate cheaper than the reference and non-inferior within ``margin``
    (decision.noninferior_pick ordered by cost)."""
    return noninferior_pick(candidates, reference=reference, margin=margin, order="cost", reference_value=reference_cost)


def round_winner(best: Sequence[TrialRecord], quality: str) -> TrialRecord | None:
    """A round's winner: the best train quality on its front (the first of equals)."""
    members = [t for t in best if t.genome is not None]
    return max(members, key=lambda t: t.quality(quality)) if members else None


def ledger_decision(record: TrialRecord, *, front: Collection[str], champion: str) -> Standing:
    """What the search decided about one trial, by variant: the champion's, on the front,
    dominated (feasible but beaten), infeasible (a hard criterion failed), or failed."""
    if record.state != "COMPLETE":
        return "failed"
    if record.variant_hash == champion:
        return "champion"
    if record.variant_hash in front:
        return "front"
    return "dominated" if record.feasible else "infeasible"
