"""What a search fixes before its first paid call: the splits' task ids, the hashes freeze.json
pins (config, workload, splits, scorer, seed), the doctor's check of the workload, and the refusal
to resume a study under anything else."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.configpath import portable_options
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.provenance import git_revision
from evoharness.compiler.runtime.workload import Workload, live_tools, shipped_doctor_record, workload_factory
from evoharness.compiler.variant import content_hash
from evoharness.search.evaluation.coverage import coverage_warning
from evoharness.search.evaluation.scorer import scorer_hash
from evoharness.search.evaluation.task_data import task_hash, tasks_hash
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.records import doctor_record as doctor
from evoharness.search.records.provenance import split_strata
from evoharness.search.records.versions import checked, versioned


@dataclass(frozen=True)
class Splits:
    """The workload and the task ids of each split, as this search reads them (train cut to
    search.train_limit)."""

    workload: Workload
    task_ids: Mapping[str, tuple[str, ...]]
    reserve: tuple[str, ...] = ()  # train tasks beyond search.train_limit a promising proposal's race may run

    @classmethod
    def of(cls, settings: RunSettings, workload: Workload | None = None) -> Splits:
        """``workload``: the one the caller built from these settings already (a dataset is parsed once)."""
        workload = workload or workload_factory(settings.workload.name)(**dict(settings.workload.options))
        every = list(workload.tasks("train"))
        train = every[: settings.search.train_limit or None]
        race = settings.search.race
        more = every[len(train):] if race.enabled else []
        if race.max_tasks is not None:
            more = more[: max(0, race.max_tasks - len(train))]
        return cls(workload, {
            "train": tuple(t.task_id for t in train),
            "dev": tuple(t.task_id for t in workload.tasks("dev")),
            "holdout": tuple(t.task_id for t in workload.tasks("holdout")),
        }, tuple(t.task_id for t in more))

    def sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.task_ids.items()}


def base_tools(settings: RunSettings) -> list[str]:
    """The base agent's tools, from its config."""
    from evoharness.compiler.catalog import build_catalog, select_tools

    return [s.name for s in select_tools(settings.agent.get("tools") or [], build_catalog(settings.tool))]


def warn_uncovered(splits: Splits, offered: list[str], echo: Callable[[str], None]) -> None:
    """A line per split whose tasks call tools the base agent does not offer (they cannot pass)."""
    for split, ids in splits.task_ids.items():
        gap = coverage_warning(offered, [splits.workload.task(t) for t in ids], where=split)
        if gap:
            echo(gap)


def freeze(settings: RunSettings, paths: StudyPaths, splits: Splits, *, tools: list[str],
           echo: Callable[[str], None]) -> dict[str, Any]:
    """The hashes the study is frozen under: written to freeze.json on the first run; on a resume,
    checked against what it holds and read from it (a study is never continued under another
    config, workload or scorer)."""
    st, s, workload = settings, settings.search, splits.workload
    frozen: dict[str, Any] = {
        "config_hash": content_hash({"agent": st.agent, "tool": st.tool, "models": st.models,
                                     "workload": {**st.workload.to_dict(), "options": portable_options(st.workload.options)},
                                     "criteria": st.resolved["criteria"], "mutators": st.resolved["mutators"], "seed": st.seed,
                                     "search": s.frozen_part()}),
        "workload_hash": content_hash([tasks_hash([workload.task(t) for t in ids]) for ids in splits.task_ids.values()]),
        "splits_hash": content_hash({k: list(v) for k, v in splits.task_ids.items()}),
        "scorer_hash": scorer_hash(workload),
        "seed": st.seed,
        "split_strata": split_strata({k: [workload.task(t) for t in ids] for k, ids in splits.task_ids.items()}),
    }
    replayed = getattr(workload, "tool_outputs_hash", None)
    if replayed:  # the live tools' recorded outputs are part of what the claim was judged on
        frozen["tool_outputs_hash"] = str(replayed)
    live = refuse_live_tools(workload, live_ok=s.live_ok)
    if live:  # search.live_ok: the claim rests on outputs that may drift, and freeze.json says which tools
        frozen["live_tools"] = list(live)
        echo(f"warning: tools {list(live)} run live in this search (search.live_ok=true): their outputs may change between "
             "the trials, dev and holdout; every record names them")
    checkup = doctor.status(st.runs_dir, workload.name,
                            doctor.workload_hash(workload, st.workload.options, tools=tools,
                                                 max_turns=int(st.agent.get("max_turns", 12))),
                            shipped=shipped_doctor_record(workload))
    unchecked = doctor.warning(checkup, workload.name)
    if unchecked:
        echo(unchecked)
    # per task, so a refused resume can name the tasks that changed (not only that the hash did)
    each = {t: task_hash(workload.task(t))[:16] for ids in splits.task_ids.values() for t in ids}
    path = paths.freeze
    if path.exists():
        before = checked("freeze", json.loads(path.read_text(encoding="utf-8")), path)
        changed = [k for k in frozen if before.get(k) != frozen[k]]
        if "workload_hash" in changed and set(changed) <= {"workload_hash", "splits_hash", "split_strata"}:
            raise ConfigError("workload", f"study {s.study!r} was frozen on other tasks: {changed_tasks(before.get('task_hashes'), each)}; "
                              "its stored results were scored against the tasks as they were",
                              f"restore the tasks (the tasks file) as they were, pick a new search.study, or delete {paths.dir}")
        if changed == ["scorer_hash"]:
            raise ConfigError("search.study", f"study {s.study!r} was frozen under another version of the workload's scorer "
                              "(its source changed), and one claim cannot compare variants judged by two scorers",
                              f"start a new search.study, or delete {paths.dir}")
        if changed:
            stored = before.get("resolved_config") or {}
            # which config groups moved, so an upgrade that changed a default (a new default mutator) is named
            moved = [k for k in ("agent", "tool", "model", "workload", "criteria", "mutators")
                     if isinstance(stored, Mapping) and k in stored and stored.get(k) != st.resolved.get(k)]
            what = f" (its {', '.join(moved)} differ from freeze.json's resolved_config)" if "config_hash" in changed and moved else ""
            raise ConfigError("search.study", f"study {s.study!r} was started with a different {', '.join(changed)}{what}",
                              "resume with the config it was started with (freeze.json's resolved_config: e.g. its "
                              "mutators.enabled, when a newer version added default mutators), pick a new search.study, "
                              f"or delete {paths.dir}")
        return {**before, "doctor": checkup}  # the doctor may have run since the study was frozen
    resolved = {**st.resolved, "search": {**st.resolved["search"], "storage": paths.storage_public}}
    write_json_atomic(path, versioned("freeze", {**frozen, "task_hashes": each, "created_at": datetime.now(UTC).isoformat(),
                                                 "git_revision": git_revision(), "doctor": checkup, "resolved_config": resolved}))
    return {**frozen, "doctor": checkup}


def refuse_live_tools(workload: Workload, *, live_ok: bool) -> tuple[str, ...]:
    """The live tools, or, unless ``live_ok``, a ConfigError: a search compares variants on outputs
    that must not drift between its trials and its holdout."""
    live = live_tools(workload)
    if live and not live_ok:
        raise ConfigError("search.live_ok", f"tools {list(live)} are live and no tool-output snapshot replays them, so they "
                          "would call their service throughout the search and its claim would rest on outputs that drift",
                          "record a snapshot (`evoharness doctor workload.options.tool_outputs={path: F, mode: record}` runs the gold "
                          "calls of every split, no agent and no holdout look), then search with mode: replay; or set "
                          "search.live_ok=true (every record then names the live tools)")
    return live


def changed_tasks(before: object, now: Mapping[str, str]) -> str:
    """Which tasks differ from the frozen ones, for the refusal's one line."""
    if not isinstance(before, Mapping):  # frozen by an evoharness whose tasks hash left task data out
        return "the workload hash differs (this freeze predates per-task hashes, and task data in the hash)"
    edited = [t for t in now if t in before and before[t] != now[t]]
    parts = [f"{len(v)} {what} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})" for what, v in
             (("changed", edited), ("added", [t for t in now if t not in before]), ("removed", [t for t in before if t not in now])) if v]
    return "; ".join(parts) or "the same tasks in another order"
