"""What a round evaluates before NSGA-II samples: the enqueued trials, in priority order. Pure.

Priority within the round's budget: the baseline; in the first round every gene's main effect
(one change at a time); the identity controls (fresh samples of known genomes: the noise
yardstick); the previous front; each anchor with all the entries that improved it last round
(``accumulated``); then each new pool entry tried on the anchor it was made for, then on the others.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.search.genome import BASELINE, SLOT_KINDS, Genome, Pools, SlotKind
from evoharness.search.genome_params import genome_to_params, param_space
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.pool_growth import with_new_entry


@dataclass(frozen=True)
class NewEntry:
    """A pool entry a mutator added between rounds."""

    kind: SlotKind
    key: str | None
    author: str
    note: str = ""
    index: int | None = None  # its place in the slot's pool; None (rounds stored before) = the newest
    anchor: Genome | None = None  # the front member it was built on, and is tried on first (None: the first anchor)
    support: int = 0  # failed episodes of that anchor whose failures name a tool the entry addresses

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "author": self.author, "note": self.note, "index": self.index,
                "anchor": None if self.anchor is None else self.anchor.to_dict(), "support": self.support}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NewEntry:
        if d.get("kind") not in SLOT_KINDS:
            raise ValueError(f"pool entry kind {d.get('kind')!r} is not one of {SLOT_KINDS}")
        index = d.get("index")
        return cls(kind=d["kind"], key=d.get("key"), author=str(d["author"]), note=str(d.get("note", "")),
                   index=int(index) if isinstance(index, int) and not isinstance(index, bool) else None,
                   anchor=Genome.from_dict(d["anchor"]) if isinstance(d.get("anchor"), Mapping) else None,
                   support=int(d.get("support") or 0))

    def chosen_by(self, genome: Genome) -> bool:
        """Whether ``genome`` carries this entry."""
        if self.kind == "section":
            return genome.sections.get(self.key or "", 0) == self.index
        if self.kind == "tool":
            return genome.tools.get(self.key or "", 0) == self.index
        if self.kind == "step":
            return self.key in genome.steps
        return bool(getattr(genome, self.kind) == self.index)  # toolset, model, temperature: a genome field each


@dataclass(frozen=True)
class ControlRequest:
    """A known genome a mutator asked to re-evaluate with fresh samples."""

    genome: Genome
    author: str

    def to_dict(self) -> dict[str, Any]:
        return {"genome": self.genome.to_dict(), "author": self.author}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ControlRequest:
        return cls(genome=Genome.from_dict(d["genome"]), author=str(d["author"]))


@dataclass(frozen=True)
class Queued:
    params: dict[str, Any]  # every Optuna parameter of the round fixed
    attrs: dict[str, Any]  # user attributes: origin, and control for a control


def anchors(front: Sequence[TrialRecord], quality: str, *, margin: float | None = None,
            reference: float | None = None, reference_cost: float | None = None) -> list[Genome]:
    """The front members new entries are tried on: the best quality, and a cheap member, so an
    edit that lifts a cheap configuration gets its chance as well as one that polishes the best.

    The cheap member: under cheapest_noninferior (``margin`` given), the cheapest member that costs
    less than the baseline and is within ``margin`` of the baseline's quality; when none is yet,
    the best-quality member that costs less (the cheap configuration closest to qualifying, which
    is where an edit has the most to win). Otherwise (a best-quality rule, which does not weigh
    cost) the cheapest member better than the baseline, and none when no member is: a cheap member
    below the baseline cannot become the best, and the proposals tried on it would be the budget's
    loss. The baseline's quality and cost are ``reference`` and
    ``reference_cost`` (its train result this round; the front need not hold it), else the front's
    baseline member's. The baseline when there is no front."""
    members = [t for t in front if t.genome is not None]
    if not members:
        return [BASELINE]

    def cost(t: TrialRecord) -> float:
        return float(t.train.get("cost_per_task", 0.0))

    by_quality = max(members, key=lambda t: t.quality(quality))
    base = next((t for t in members if t.origin == "baseline"), None)
    base_q = reference if reference is not None else (base.quality(quality) if base is not None else 0.0)
    if margin is None:
        better = [t for t in members if t.quality(quality) > base_q]
        by_cost = min(better, key=cost) if better else by_quality
    else:
        base_cost = reference_cost if reference_cost is not None else (cost(base) if base is not None else float("inf"))
        cheaper = [t for t in members if cost(t) < base_cost]
        within = [t for t in cheaper if t.quality(quality) >= base_q - margin - 1e-12]
        by_cost = (min(within, key=cost) if within else max(cheaper, key=lambda t: (t.quality(quality), -cost(t))) if cheaper
                   else min(members, key=cost))
    chosen = [by_quality] if by_quality.number == by_cost.number and by_quality.round == by_cost.round else [by_quality, by_cost]
    return [t.genome for t in chosen if t.genome is not None]


def round_queue(
    round_index: int,
    pools: Pools,
    front: Sequence[TrialRecord],
    added: Sequence[NewEntry],
    controls: Sequence[ControlRequest],
    *,
    quality: str,
    budget: float,
    base_format: str,
    base_steps: Mapping[str, bool],
    margin: float | None = None,
    reference: float | None = None,
    reference_cost: float | None = None,
    accumulated: Sequence[Genome] = (),
    proposal_cost: float = 1.0,
) -> list[Queued]:
    """The trials to enqueue, first come first served, without repeats (a control is never merged
    with the same genome's ordinary evaluation: it draws fresh samples); at most ``budget`` paid
    evaluations' worth of them, a proposal on its anchor counted at ``proposal_cost`` (the share of
    an evaluation its first block costs when proposals race), and re-reads of earlier rounds'
    genomes come on top. Proposals the round's budget then does not reach wait in the study."""

    def params(g: Genome) -> dict[str, Any]:
        return genome_to_params(g, pools, base_format=base_format, base_steps=base_steps)

    queue = [Queued(params(BASELINE), {"origin": "baseline"})]
    if round_index == 0:
        base_params = params(BASELINE)
        for name, choices in param_space(pools).items():
            queue += [Queued({**base_params, name: c}, {"origin": "one_change"}) for c in choices if c != base_params[name]]
    queue += [Queued(params(c.genome), {"origin": "control", "control": c.author}) for c in controls]
    queue += [Queued(params(t.genome), {"origin": "front"}) for t in front if t.genome is not None]
    queue += [Queued(params(g), {"origin": "accumulated"}) for g in accumulated]
    step_names, tried_on = list(base_steps), anchors(front, quality, margin=margin, reference=reference, reference_cost=reference_cost)
    # every entry on the anchor it was built for first (in the order given: carried over, then by
    # the evidence behind it), then on the other anchors, so the budget measures each proposal once
    # before it measures any twice
    own = [(a, a.anchor if a.anchor is not None else tried_on[0]) for a in added]
    tries = own + [(a, other) for a, mine in own for other in tried_on if other != mine]
    for a, anchor in tries:
        g = with_new_entry(anchor, pools, a.kind, a.key, step_names, index=a.index)
        queue.append(Queued(params(g), {"origin": f"new:{a.author}", "anchor": anchor.to_dict()}))
    # a genome that picks a retired entry cannot be asked for this round (the sampler no longer has
    # the choice); retirement spares what the round queues, so this only guards against a crash
    space = param_space(pools)
    queue = [q for q in queue if all(v in space[n] for n, v in q.params.items() if n in space)]
    unique: dict[str, Queued] = {}
    for q in queue:
        unique.setdefault(json.dumps(q.params, sort_keys=True) + str(q.attrs.get("control")), q)
    # the budget buys paid evaluations: what an earlier round evaluated on the same seed (its front,
    # and the baseline after round 0) is a free re-read and never crowds out a new genome
    chosen, paid = [], 0.0
    for q in unique.values():
        free = q.attrs["origin"] == "front" or (q.attrs["origin"] == "baseline" and round_index > 0)
        if free or paid < budget - 1e-9:
            chosen.append(q)
            paid += 0.0 if free else proposal_cost if q.attrs["origin"].startswith("new:") else 1.0
    return chosen


def accumulated(records: Sequence[TrialRecord], quality: str, *,
                canon: Callable[[Genome], Genome] = lambda g: g) -> list[Genome]:
    """Per anchor of the round, the anchor with every new entry whose paired evidence says it
    improved it (one per slot: the bigger paired gain first), when two or more did: so rules and
    edits found one by one are combined, and a later round's variant carries the edits of several.
    The evidence is each proposal's race record (proposal minus anchor on the same tasks and
    seeds): the accepted ones (interval above 0 on the whole split) when any is, else those with a
    positive paired mean (undecided: a +0.05 edit rarely clears the interval on 40 tasks, and
    combining two likely gains is cheaper than proving each). A proposal without a record (its
    anchor had no stored evaluation to pair with) counts by its train quality against the anchor's
    trial of this round. Raced-out proposals are not complete and never combined. Genomes are
    compared and merged in ``canon``'s form (the search passes ``genome.canonical``: genes at their
    baseline left out, so a genome recorded under smaller pools equals itself under larger ones). Pure."""
    done = [r for r in records if r.state == "COMPLETE" and r.genome is not None]

    def key(g: Genome) -> str:
        return json.dumps(canon(g).to_dict(), sort_keys=True)

    by_genome = {key(r.genome): r for r in done if r.genome is not None}
    groups: dict[str, list[TrialRecord]] = {}
    for r in done:
        if r.origin.startswith("new:") and r.anchor is not None:
            groups.setdefault(key(r.anchor), []).append(r)
    out: list[Genome] = []
    for anchor_key, tries in groups.items():
        base = by_genome.get(anchor_key)
        gains = {r.number: _gain(r, base, quality) for r in tries}
        accepted = [r for r in tries if r.race is not None and r.race.get("decision") == "accepted"]
        better = sorted(accepted or [r for r in tries if (gains[r.number] or 0.0) > 0], key=lambda r: -(gains[r.number] or 0.0))
        anchor = tries[0].anchor
        assert anchor is not None
        start = canon(anchor).to_dict()
        merged, taken = dict(start), set[tuple[str, str | None]]()
        for r in better:
            assert r.genome is not None
            tried = canon(r.genome).to_dict()
            change = _changed(start, tried)
            if change and not change & taken:
                for field, sub in change:
                    merged[field] = tried[field] if sub is None else {**merged[field], sub: tried[field][sub]}
                taken |= change
        if len(taken) >= 2:
            out.append(Genome.from_dict(merged))
    return out


def _gain(r: TrialRecord, base: TrialRecord | None, quality: str) -> float | None:
    """A proposal's gain over its anchor: its paired difference, else the train qualities' (None: no anchor trial)."""
    if r.race is not None:
        return float(r.race["mean_diff"])
    return None if base is None else r.quality(quality) - base.quality(quality)


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> set[tuple[str, str | None]]:
    """The genes b sets differently from a: (field, key) for the mapping fields, (field, None) else."""
    out: set[tuple[str, str | None]] = set()
    for field, value in b.items():
        if isinstance(value, Mapping):
            out |= {(field, k) for k, v in value.items() if a.get(field, {}).get(k) != v}
        elif a.get(field) != value:
            out.add((field, None))
    return out
