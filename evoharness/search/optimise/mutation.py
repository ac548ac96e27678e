"""Between rounds: the mutators grow the pools from the front's failed train episodes.

Each round's pools are stored (``runs/<study>/pools/r<k>.json``), so a resumed round searches the
same pools and never pays an LLM mutator twice.
"""
from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.catalog import build_catalog, select_tools
from evoharness.compiler.runtime.cache import open_cache
from evoharness.compiler.runtime.prices import config_price
from evoharness.compiler.runtime.workload import Workload
from evoharness.compiler.variant import compile_agent, content_hash
from evoharness.search.evaluation.criteria import quality_objective
from evoharness.search.genome import Genome, Pools, SlotKind, initial_pools
from evoharness.search.mutators.base import (
    Control,
    FailedEpisode,
    MutationContext,
    Mutator,
    Proposal,
    TeacherRunner,
    ToolLoad,
    grow_pools,
    section_text,
)
from evoharness.search.mutators.escalation import troubled
from evoharness.search.mutators.rule_miner import parse_failures
from evoharness.search.optimise.seeding import ControlRequest, NewEntry, anchors
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.study import TrialRecord
from evoharness.search.pool_growth import chosen, live_len, pool_len, retire_one
from evoharness.search.records.versions import checked


@dataclass(frozen=True)
class RoundPools:
    pools: Pools
    added: tuple[NewEntry, ...] = ()
    controls: tuple[ControlRequest, ...] = ()


def first_pools(settings: RunSettings) -> Pools:
    """Round 0: the baseline of every slot, the search's models, temperatures and formats."""
    pools = initial_pools(settings.agent, models=list(settings.models)[1:], temperatures=list(settings.search.temperatures),
                          base_model="base", base_temperature=float(settings.models["base"].get("temperature", 0.0)))
    return replace(pools, formats=tuple(dict.fromkeys([settings.base_format, *settings.search.formats])))


def stored_round(paths: StudyPaths, k: int) -> RoundPools | None:
    path = paths.pools(k)
    if not path.exists():
        return None
    d = json.loads(path.read_text(encoding="utf-8"))
    return RoundPools(Pools.from_dict(d["pools"]), tuple(NewEntry.from_dict(a) for a in d.get("added", [])),
                      tuple(ControlRequest.from_dict(c) for c in d.get("controls", [])))


def store_round(paths: StudyPaths, k: int, rp: RoundPools) -> None:
    write_json_atomic(paths.pools(k), {"pools": rp.pools.to_dict(), "added": [a.to_dict() for a in rp.added],
                                       "controls": [c.to_dict() for c in rp.controls]})


def stored_evidence(paths: StudyPaths, eval_key: str | None) -> list[dict[str, Any]]:
    """The failed episodes of a stored evaluation (empty when none is stored under ``eval_key``)."""
    stored = paths.evals / f"{eval_key}.json"
    if not eval_key or not stored.exists():
        return []
    return list(checked("trial_result", json.loads(stored.read_text(encoding="utf-8")), stored).get("evidence", []))


def front_evidence(paths: StudyPaths, front: Sequence[TrialRecord]) -> list[FailedEpisode]:
    """The failed train episodes of the front members, from their stored evaluations, each with
    the front member that failed it."""
    return [replace(FailedEpisode.from_dict(e), genome=t.genome)
            for t in front if t.genome is not None for e in stored_evidence(paths, t.eval_key)]


def stored_load(paths: StudyPaths, eval_key: str | None) -> dict[str, ToolLoad]:
    """A stored evaluation's tool output per tool, summed over its episodes (empty when none is
    stored, or it was stored before tool output was kept)."""
    stored = paths.evals / f"{eval_key}.json"
    if not eval_key or not stored.exists():
        return {}
    episodes = checked("trial_result", json.loads(stored.read_text(encoding="utf-8")), stored).get("report", {}).get("episodes", [])
    sums: dict[str, list[int]] = {}
    counted = [t for e in episodes if isinstance(t := e.get("turns"), int) and not isinstance(t, bool) and t > 0]
    turns = sum(counted) if len(counted) == len(episodes) else 0  # an episode recorded without them: turns unknown
    for e in episodes:
        for tool, counts in dict(e.get("tool_output") or {}).items():
            if not (isinstance(counts, list) and len(counts) == 3 and all(isinstance(x, int) and x >= 0 for x in counts)):
                continue  # a row of another shape (a damaged or hand-edited record) says nothing about the load
            calls, chars, longest = counts
            row = sums.setdefault(str(tool), [0, 0, 0])
            row[0], row[1], row[2] = row[0] + calls, row[1] + chars, max(row[2], longest)
    return {t: ToolLoad(calls=c, chars=n, longest=m, episodes=len(episodes), turns=turns) for t, (c, n, m) in sorted(sums.items())}


def front_load(paths: StudyPaths, front: Sequence[TrialRecord]) -> list[tuple[Genome, dict[str, ToolLoad]]]:
    """Each front member's tool output on train, from its stored evaluation."""
    return [(t.genome, stored_load(paths, t.eval_key)) for t in front if t.genome is not None]


def losses(paths: StudyPaths, eval_key: str | None) -> dict[str, int]:
    """Where a variant loses reward on train: how many of its failed episodes show each failure
    kind (an episode can show several), most frequent first; empty when nothing is stored."""
    counts: dict[str, int] = {}
    for e in stored_evidence(paths, eval_key):
        for kind in {str(f.get("kind")) for f in e.get("failures", [])}:
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def teacher_runner(settings: RunSettings, workload: Workload,
                   on_cost: Callable[[str, float | None], None] | None = None) -> TeacherRunner | None:
    """Runs search.teacher (a stronger model) with the baseline harness on failing train tasks."""
    if settings.teacher is None:
        return None
    teacher = settings.teacher

    def run(task_ids: Sequence[str]) -> dict[str, list[str]]:
        from evoharness.search.evaluation.evaluate import evaluate_variant_async

        variant = compile_agent(settings.agent, tool=settings.tool, model=teacher)
        tasks = [workload.task(t) for t in task_ids]
        cache = open_cache(settings.cache_dir) if settings.cache_dir else None  # a resumed round does not pay twice
        _, trajectories = asyncio.run(evaluate_variant_async(variant, workload, "train", tasks=tasks, seed=settings.seed, cache=cache,
                                                             keep_trajectories=True))
        if on_cost is not None:  # cached calls were paid for once, in an earlier run
            paid = [c.cost_usd for t in trajectories for c in t.model_calls if not c.cached]
            on_cost("teacher", None if None in paid else sum(c for c in paid if c is not None))
        return {t.task_id: [f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in t.tool_calls if c.error is None]
                for t in trajectories}

    return run


def mutate(
    settings: RunSettings, k: int, pools: Pools, front: Sequence[TrialRecord], evidence: Sequence[FailedEpisode], *,
    mutators: Sequence[tuple[Mutator, float]], run_teacher: TeacherRunner | None, echo: Callable[[str], None],
    keep: Sequence[Genome] = (), reference: tuple[float, float] | None = None, costs: list[tuple[str, float | None]] | None = None,
    loads: Sequence[tuple[Genome, Mapping[str, ToolLoad]]] = (),
) -> RoundPools:
    """Every mutator (a weight below 1 is the chance it runs this round) proposes once per anchor
    (the front members new entries are tried on), from that anchor's own failed episodes and on
    top of what that anchor already picks, so edits accumulate along each anchor's line. Proposals
    grow the pools up to ``mutators.pool_size`` live entries per slot; a full section or tool slot
    first retires its oldest entry that no front member (nor a ``keep`` genome: the anchors of
    proposals still waiting to be tried) picks and that this round did not add. Entries come out ranked by their evidence.
    The LLM mutators' paid calls are appended to ``costs`` as (mutator, USD); ``loads`` holds each
    front member's tool output on train, which the anchor's context carries."""
    tools = {s.name: s for s in select_tools(settings.agent["tools"], build_catalog(settings.tool))}
    genomes = [t.genome for t in front if t.genome is not None]
    margin = settings.rule.bar
    ref_q, ref_cost = reference if reference is not None else (None, None)
    tried_on = (anchors(front, quality_objective(settings.objectives), margin=margin, reference=ref_q, reference_cost=ref_cost)
                if front else [Genome()])
    proposals: list[tuple[Proposal | Control, Genome, int]] = []
    prices = {name: price.input_per_token for name, cfg in settings.models.items() if (price := config_price(cfg)) is not None}
    for i, a in enumerate(tried_on):
        own = tuple(e for e in evidence if e.genome == a)
        # the anchor's own failures first; the rest of the front's after them, so a rule list covers
        # every tool and argument the front got wrong (a failure of one variant is a risk for all)
        ctx = MutationContext(agent=settings.agent, tools=tools, pools=pools, front=(a, *(g for g in genomes if g != a)),
                              evidence=own + tuple(e for e in evidence if e.genome != a), models=tuple(settings.models), round=k,
                              run_teacher=run_teacher,
                              cache_dir=settings.cache_dir, on_cost=None if costs is None else lambda who, usd: costs.append((who, usd)),
                              load=next((dict(load) for g, load in loads if g == a), {}), prices=prices)
        for m, weight in mutators:
            rng = random.Random(content_hash([settings.search.seed, k, m.name] + ([i] if i else [])))
            if weight < 1.0 and random.Random(content_hash([settings.search.seed, k, m.name])).random() >= weight:
                continue
            try:
                made = list(m.propose(ctx, rng=rng))
            except Exception as exc:  # one broken mutator (e.g. its LLM route is down) must not end the search
                echo(f"warning: mutator {m.name} failed in round {k}: {type(exc).__name__}: {exc}")
                continue
            mine = replace(ctx, evidence=own)
            proposals += [(p, a, support(p, mine)) for p in made]
    proposals = _interleaved(proposals, tried_on)
    cap, pinned = settings.pool_size, [*genomes, *keep]

    def room(ps: Pools, kind: SlotKind, key: str | None) -> Pools:
        if live_len(ps, kind, key) < cap:
            return ps
        picked = [chosen(g, kind, key) for g in pinned]
        fresh = range(pool_len(pools, kind, key), pool_len(ps, kind, key))  # this round's entries wait to be tried
        return retire_one(ps, kind, key, keep=[*picked, *fresh])[0]

    grown, added, controls = grow_pools(pools, [p for p, _, _ in proposals], room=room,
                                        cap=lambda ps, kind, key: live_len(ps, kind, key) < cap)
    made_by = {id(p): (a, n) for p, a, n in proposals}
    entries = list(new_entries(pools, added, made_by))
    # the same value proposed for another anchor is one pool entry, tried on each anchor that asked for it
    for p, a, n in proposals:
        if isinstance(p, Control) or any(p is q for q in added):
            continue
        twin = next((e for e, q in zip(entries, added) if (q.kind, q.key) == (p.kind, p.key) and q.entry.value == p.entry.value), None)
        if twin is not None and twin.anchor != a:
            entries.append(replace(twin, anchor=a, support=n))
    unique_controls = {json.dumps(c.genome.to_dict(), sort_keys=True): c for c in controls}
    per_anchor = sum(1 for p, a, _ in proposals if isinstance(p, Control) and a == tried_on[0])  # identity once, not per anchor
    ranked = _interleaved([(e, e.anchor or tried_on[0], e.support) for e in entries], tried_on)
    return RoundPools(grown, tuple(e for e, _, _ in ranked),
                      tuple(ControlRequest(c.genome, c.author) for c in list(unique_controls.values())[:per_anchor]))


def _interleaved(items: Sequence[tuple[Any, Genome, int]], anchors_: Sequence[Genome]) -> list[tuple[Any, Genome, int]]:
    """Per anchor, each mutator's best-supported proposal before any mutator's second (among
    equals, best-supported first; ties keep the mutators' order), then one from each anchor in
    turn: every anchor claims its share of the pools' room and of the round's budget, and a lever
    whose evidence is not a failure count (a clip answers a token load) is measured in the round
    that proposed it instead of waiting behind every rule."""
    def by_author(queue: list[tuple[Any, Genome, int]]) -> list[tuple[Any, Genome, int]]:
        depth: dict[str, int] = {}
        ranked: list[tuple[int, int, int, tuple[Any, Genome, int]]] = []
        for x in sorted(queue, key=lambda x: -x[2]):
            who = _author(x[0])
            ranked.append((depth.get(who, 0), -x[2], len(ranked), x))
            depth[who] = depth.get(who, 0) + 1
        return [x for *_, x in sorted(ranked, key=lambda r: r[:3])]

    queues = [by_author([x for x in items if x[1] == a]) for a in anchors_]
    rest = [x for x in items if not any(x[1] == a for a in anchors_)]
    out: list[tuple[Any, Genome, int]] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        out += [q[depth] for q in queues if depth < len(q)]
    return out + rest


def _author(item: Any) -> str:
    """Who made a ranked item: a proposal's or control's author, or a new pool entry's."""
    if isinstance(item, Proposal):
        return item.entry.author
    return str(getattr(item, "author", ""))


def support(p: Proposal | Control, ctx: MutationContext) -> int:
    """How many of the anchor's failed episodes the proposal addresses: for a tool edit or a section
    text, those whose failures name its tool or a tool its new text names that the anchor's text
    did not; for a workflow step, every one (a step acts on the whole episode)."""
    if isinstance(p, Control):
        return 0
    if p.kind == "step":
        return len(ctx.evidence)
    if p.kind == "escalation":
        return sum(1 for e in ctx.evidence if any(troubled(e, t) for t in p.entry.value.get("on", ())))
    if p.kind == "max_turns":
        return sum(1 for e in ctx.evidence if troubled(e, "max_turns"))
    if p.kind == "tool" and p.key is not None:
        named = {p.key}
    elif p.kind == "section" and p.key is not None:
        before = section_text(ctx, p.key)
        named = {t for t in ctx.tools if re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", str(p.entry.value))
                 and not re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", before)}
    else:
        return 0
    return sum(1 for e in ctx.evidence if any(f.tool in named for f in parse_failures(e, ctx.tools)))


def new_entries(before: Pools, added: Sequence[Proposal],
                made_by: Mapping[int, tuple[Genome, int]] | None = None) -> tuple[NewEntry, ...]:
    """The added proposals as pool entries with their places: each takes the next index of its
    slot, in order, so several entries for one slot are each tried, each under its own author
    (and on the anchor it was made for, with its support, when ``made_by`` says)."""
    sizes: dict[tuple[str, str | None], int] = {}
    entries = []
    for p in added:
        slot = (p.kind, p.key)
        index = sizes.setdefault(slot, pool_len(before, p.kind, p.key))
        sizes[slot] = index + 1
        anchor, n = (made_by or {}).get(id(p), (None, 0))
        entries.append(NewEntry(p.kind, p.key, p.entry.author, p.entry.note, index=None if p.kind == "step" else index,
                                anchor=anchor, support=n))
    return tuple(entries)

