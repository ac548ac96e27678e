"""``<study>/all``: every round's trials in one Optuna study, the view optuna-dashboard opens.

Each variant the search evaluated is one trial there: a free re-read of an evaluation an earlier
trial made (a front member carried into the next round) is named on that trial (``reads``), and
an identity control (the same variant on fresh samples, the noise yardstick) is listed on it with
its values (``controls``), neither added again, so the dashboard's best trials are the variants of
the front, each once. The genome
is the trial's params, one categorical per slot labelled by what each choice is (``#3
rule_miner``, ``sim_medium``, ``on``), with every choice the pools ever held, so importance, slice
and contour plots read across rounds. Each trial carries the round, the report's label for it
(``round 1 trial 9``) and ``kind``: ``evaluated``, ``raced out``, ``failed``, or ``control`` for a
control whose variant has no evaluation of its own in the view.

The view is derived from the round studies and rebuilt from them after each round (the choices
grow as the mutators add entries, and Optuna lets one parameter have one set of choices per
study); the study's own attributes, the holdout claim among them, are carried over.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from evoharness.search.evaluation.criteria import Objective
from evoharness.search.genome import Genome, PoolEntry, Pools
from evoharness.search.genome_edits import escalation_what

VIEW_ATTRS = ("genome", "authors", "origin", "variant_hash", "feasible", "error", "race", "control")


def view_name(study: str) -> str:
    return f"{study}/all"


def label(round_index: int, number: int) -> str:
    """How the report and the round lines name a trial: its number restarts every round."""
    return f"round {round_index} trial {number}"


def choices(pools: Pools, *, base_format: str) -> dict[str, tuple[str, ...]]:
    """Every slot with more than one choice, and the label of each choice, in the pool's order
    (a retired entry keeps its place: the trials that used it are in the view)."""
    def entries(pool: Sequence[PoolEntry]) -> tuple[str, ...]:
        return tuple(f"#{i} {e.author}" for i, e in enumerate(pool))

    out: dict[str, tuple[str, ...]] = {}
    out.update({f"section.{k}": entries(v) for k, v in sorted(pools.sections.items()) if len(v) > 1})
    out.update({f"tool.{k}": entries(v) for k, v in sorted(pools.tools.items()) if len(v) > 1})
    out.update({f"step.{k}": ("off", "on") for k in sorted(pools.steps)})
    if len(pools.toolsets) > 1:
        out["toolset"] = entries(pools.toolsets)
    if len(pools.contexts) > 1:
        out["context"] = entries(pools.contexts)
    if len(pools.escalations) > 1:
        out["escalation"] = tuple(f"#{i} {escalation_what(e.value) or e.author}" for i, e in enumerate(pools.escalations))
    if len(pools.turn_limits) > 1:
        out["max_turns"] = tuple(f"#{i} {e.value}" for i, e in enumerate(pools.turn_limits))
    formats = tuple(dict.fromkeys([base_format, *pools.formats]))
    if len(formats) > 1:
        out["tool_format"] = formats
    for slot, pool in (("model", pools.models), ("temperature", pools.temperatures)):
        if len(pool) > 1:
            names = [str(e.value) for e in pool]
            out[slot] = tuple(names) if len(set(names)) == len(names) else tuple(f"#{i} {n}" for i, n in enumerate(names))
    return out


def params(genome: Genome, space: Mapping[str, tuple[str, ...]], *, base_format: str,
           base_steps: Mapping[str, bool]) -> dict[str, str]:
    """The genome's choice in every slot of ``space``, by its label."""
    out: dict[str, str] = {}
    for key, labels in space.items():
        kind, _, name = key.partition(".")
        if kind == "step":
            out[key] = "on" if genome.steps.get(name, base_steps.get(name, False)) else "off"
        elif key == "tool_format":
            out[key] = genome.tool_format or base_format
        else:
            index = (genome.sections.get(name, 0) if kind == "section" else genome.tools.get(name, 0) if kind == "tool"
                     else int(getattr(genome, kind)))  # toolset, model, temperature, context
            out[key] = labels[index] if 0 <= index < len(labels) else labels[0]
    return out


def view_trials(rounds: Sequence[optuna.Study], pools: Pools, *, base_format: str,
                base_steps: Mapping[str, bool]) -> list[FrozenTrial]:
    """The view's trials, in round and trial order: one per evaluation (the re-reads named on it)."""
    space = choices(pools, base_format=base_format)
    dists = {k: CategoricalDistribution(v) for k, v in space.items()}
    rows: list[tuple[FrozenTrial, dict[str, Any], dict[str, str]]] = []
    by_key: dict[str, dict[str, Any]] = {}  # eval key -> the attributes of the trial that made it
    by_variant: dict[str, dict[str, Any]] = {}  # variant hash -> the attributes of its first evaluated trial
    for k, study in enumerate(rounds):
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)):
            if t.user_attrs.get("interrupted"):
                continue
            a, name = t.user_attrs, label(k, t.number)
            key = a.get("eval_key") if t.state == TrialState.COMPLETE and a.get("origin") != "control" else None
            if key and key in by_key:
                by_key[key].setdefault("reads", []).append(name)
                continue
            if t.state == TrialState.COMPLETE and a.get("origin") == "control" and a.get("variant_hash") in by_variant:
                by_variant[a["variant_hash"]].setdefault("controls", []).append({"label": name, "values": list(t.values)})
                continue
            genome = Genome.from_dict(a["genome"]) if isinstance(a.get("genome"), dict) else None
            kind = {TrialState.FAIL: "failed", TrialState.PRUNED: "raced out"}.get(
                t.state, "control" if a.get("origin") == "control" else "evaluated")
            attrs = {**{n: a[n] for n in VIEW_ATTRS if n in a}, "round": k, "round_trial": t.number, "label": name, "kind": kind}
            if key:
                by_key[key] = attrs
                by_variant.setdefault(str(a.get("variant_hash")), attrs)
            rows.append((t, attrs, params(genome, space, base_format=base_format, base_steps=base_steps) if genome else {}))
    return [optuna.trial.create_trial(state=t.state, values=t.values if t.state == TrialState.COMPLETE else None,
                                      params=chosen, distributions={n: dists[n] for n in chosen}, user_attrs=attrs)
            for t, attrs, chosen in rows]


def rebuild_view(storage: str, study: str, rounds: Sequence[optuna.Study], objectives: Sequence[Objective], pools: Pools, *,
                 base_format: str, base_steps: Mapping[str, bool]) -> int:
    """Write ``<study>/all`` again from the round studies, unless it already holds exactly these
    trials (a resumed study that ran nothing new); returns its trials. Nothing else writes the
    view's trials, and the study's lock keeps a second search off it. A kill inside the rebuild
    leaves no view or part of one: the next run's rebuild makes it whole (it is derived)."""
    trials = view_trials(rounds, pools, base_format=base_format, base_steps=base_steps)
    carried: dict[str, Any] = {}
    try:
        held = optuna.load_study(study_name=view_name(study), storage=storage)
        if _same(held.get_trials(deepcopy=False), trials) and held.metric_names == [o.metric for o in objectives]:
            return len(trials)
        carried = dict(held.user_attrs)
        optuna.delete_study(study_name=view_name(study), storage=storage)
    except KeyError:  # no view yet
        pass
    view = optuna.create_study(storage=storage, study_name=view_name(study), directions=[o.direction for o in objectives])
    for name, value in carried.items():
        view.set_user_attr(name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        view.set_metric_names([o.metric for o in objectives])
    view.add_trials(trials)
    return len(trials)


def _same(held: Sequence[FrozenTrial], trials: Sequence[FrozenTrial]) -> bool:
    def shape(t: FrozenTrial) -> tuple[Any, ...]:
        return t.state, t.values, t.params, t.distributions, t.user_attrs

    return len(held) == len(trials) and all(shape(a) == shape(b) for a, b in zip(held, trials))


def view_numbers(storage: str, study: str) -> dict[tuple[int, int], int]:
    """Each round trial's number in the view: (round, trial) -> the dashboard's trial number; a
    re-read maps to the trial that made its evaluation, a control to its variant's trial (a front
    member may be a control's record). Empty when there is no view."""
    try:
        view = optuna.load_study(study_name=view_name(study), storage=storage)
    except KeyError:
        return {}
    out: dict[tuple[int, int], int] = {}
    for t in view.get_trials(deepcopy=False):
        a = t.user_attrs
        out[(int(a["round"]), int(a["round_trial"]))] = t.number
        for name in [*(a.get("reads") or ()), *(c.get("label") for c in a.get("controls") or () if isinstance(c, dict))]:
            _, r, _, n = str(name).split()
            out[(int(r), int(n))] = t.number
    return out
