"""Which front members get a dev run, which one is the champion, each round's winner and the
ledger's decision on every trial. Pure: records in, choices out."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from evoharness.search.evaluation.decision import DevCandidate, Evidence, Reach, noninferior_pick
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


def dev_members(costs: Sequence[float], cap: int, *, chances: Sequence[Reach] | None = None, best_quality: bool = False) -> list[int]:
    """Indices of the front members (ordered best train quality first, with their train costs, or
    latencies under a rule that saves latency) re-evaluated on dev. The best on train (index 0)
    always is: when nothing else qualifies, the decision's fallback and the report need its dev
    figures.

    ``chances`` (what each member's train result says about its chance to clear the decision's
    bar, ``DecisionRule.train_chance``): the other dev runs go only to members with a chance, at
    most ``cap`` in all. Under a rule that saves cost (latency): first those whose train point
    estimate already clears the bar, then those only their interval's upper end reaches, the
    cheapest (fastest) first in each, since the rule ships the cheapest that qualifies; so a
    cheaper member that cannot qualify is passed over for a dearer one that can. Under
    ``best_quality``: the best on train first. A slot no member with a chance needs stays empty: a
    dev run on a member that cannot win decides nothing.

    Without ``chances`` (no train result of the reference to judge by): all when they fit, else
    ``cap`` spread evenly along the cost axis with the cheapest among them and the best quality in
    place of the dearest pick (with three objectives quality order is not cost order, so spacing
    by quality rank alone could skip the cheapest); under ``best_quality`` the ``cap`` best on train."""
    count, cap = len(costs), max(1, cap)
    if count == 0:
        return []
    if chances is not None:
        if len(chances) != count:
            raise ValueError(f"chances names {len(chances)} members, costs {count}; pass one per front member")
        able = [i for i in range(1, count) if chances[i] != "none"]
        if not best_quality:
            able.sort(key=lambda i: (chances[i] == "possible", costs[i], i))
        return sorted({0, *able[: cap - 1]})
    if count <= cap or best_quality:
        return list(range(min(count, cap)))
    by_cost = sorted(range(count), key=lambda i: (costs[i], i))
    picks = [by_cost[i] for i in dev_picks(count, cap)]
    if 0 not in picks:
        picks[-1] = 0  # the dearest pick gives way to the best quality
    return sorted(set(picks))


def dev_skips(count: int, picked: Collection[int], reasons: Sequence[str | None] | None, *, cap: int) -> dict[int, str]:
    """Why each front member left out of the dev runs got none, in a few words: its own reason
    (``reasons``, from the decision rule) or, for one with a chance, the cap."""
    out: dict[int, str] = {}
    for i in range(count):
        if i not in picked:
            own = reasons[i] if reasons is not None else None
            out[i] = own or f"no dev run left (search.max_front_dev={cap})"
    return out


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
