"""Config-driven commands of the search side (Hydra tasks): evaluate."""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.atomic import print_whole, write_text_atomic
from evoharness.compiler.config_compile import compile_config, to_plain
from evoharness.compiler.errors import ConfigError, RunFailed
from evoharness.compiler.runtime.models import check_model
from evoharness.compiler.runtime.workload import SPLITS, WORKLOADS, Task, Workload, checked_split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.cli.interrupt import ctrl_c_stops
from evoharness.search.evaluation.skips import DEFAULT_MAX_SKIP_RATE, check_max_skip_rate, too_many_skipped

if TYPE_CHECKING:
    from evoharness.search.evaluation.metrics import EvalReport
    from evoharness.search.optimise.settings import RunSettings



_MADE: dict[tuple[object, str], Workload] | None = None  # (factory, options) -> workload, while a command shares them


@contextlib.contextmanager
def sharing_workloads() -> Iterator[None]:
    """For one command: its pre-run checks and its run (and a basic launcher's jobs, in the same
    process) read one workload instance per configuration, so a dataset is loaded and parsed once.
    Never longer: the next command sees an edited tasks file."""
    from evoharness.compiler.config_compile import sharing_variants

    global _MADE
    _MADE = {}
    try:
        with sharing_variants():  # and one compiled variant per configuration
            yield
    finally:
        _MADE = None


def make_workload(cfg: DictConfig) -> Workload:
    factory = WORKLOADS.lookup(str(cfg.workload.name), path="workload.name")
    options = workload_options(cfg)
    key = (factory, json.dumps(options, sort_keys=True, default=repr))
    if _MADE is not None and key in _MADE:
        return _MADE[key]
    try:
        workload = factory(**options)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError("workload.options", str(exc).splitlines()[0], "check the option names and values of this workload") from None
    if _MADE is not None:
        _MADE[key] = workload
    return workload


def workload_options(cfg: DictConfig) -> dict[str, Any]:
    """``workload.options`` with relative file paths anchored to the config file that names them."""
    from evoharness.compiler.configpath import anchored_options

    return anchored_options(to_plain(cfg.workload.options) or {})


def chosen_tasks(cfg: DictConfig, workload: Workload) -> list[Task]:
    split = str(cfg.workload.split)
    if split not in SPLITS:
        raise ConfigError("workload.split", f"unknown split {split!r}", f"use one of {list(SPLITS)}")
    tasks = list(workload.tasks(split))
    if not tasks:
        raise ConfigError("workload.split", f"workload {workload.name!r} has no {split} tasks",
                          "pick a split that has tasks, or give the workload some (a tasks file: split them, or let them be hashed)")
    limit = cfg.workload.limit
    if limit is not None:
        if int(limit) < 1:
            raise ConfigError("workload.limit", f"must be positive or null, got {limit}", "set workload.limit=null for all tasks")
        tasks = tasks[: int(limit)]
    return tasks


def evaluate_validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> HarnessVariant:
    from evoharness.compiler.cli import compile_validate

    variant = compile_validate(cfg, overrides)
    if int(cfg.workload.samples) < 1:
        raise ConfigError("workload.samples", f"must be at least 1, got {cfg.workload.samples}", "set workload.samples=1 or more")
    if int(cfg.workload.concurrency) < 1:
        raise ConfigError("workload.concurrency", f"must be at least 1, got {cfg.workload.concurrency}",
                          "set workload.concurrency=1 or more")
    check_model("model", route=variant.model.route, params=variant.model.extra, api_key_env=variant.route.api_key_env,
                api_base=variant.route.api_base)
    check_max_skip_rate(cfg.workload.get("max_skip_rate", DEFAULT_MAX_SKIP_RATE))
    check_seal(cfg)
    if str(cfg.workload.split) == "holdout":  # the look is journaled in the registry: writable before it is paid for
        from evoharness.compiler.refusals import writable_dir

        writable_dir("registry_dir", cfg.registry_dir)
    chosen_tasks(cfg, make_workload(cfg))
    return variant


def check_seal(cfg: DictConfig) -> None:
    """The holdout is evaluated only on purpose (``unseal_holdout=true``), never as a search job's
    spec, and only where its look can be journaled. Checked before the run and again by the run
    itself, so a caller that skips the checks (a sweep past the preflight's combinations) is held too."""
    if str(cfg.workload.split) != "holdout":
        return
    if "trial" in cfg:
        raise ConfigError("trial", "is the search's own per-job setting", "remove +trial=... from the command")
    if not cfg.get("unseal_holdout", False):
        raise ConfigError("workload.split", "holdout is the sealed split a search's claim is made on; every look at it weakens that claim",
                          "evaluate on dev, or pass unseal_holdout=true (the look is recorded in <registry_dir>/holdout_looks.jsonl, "
                          "and a search's claim on this split counts it)")
    if not str(cfg.get("registry_dir") or "").strip():
        raise ConfigError("registry_dir", "is empty, and a look at the holdout is recorded in the registry",
                          "set registry_dir (default ${runs_dir}/registry), or evaluate on dev")


def evaluate_task(cfg: DictConfig) -> EvalReport:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from evoharness.compiler.cli import released
    from evoharness.compiler.release.merge import promoted_for
    from evoharness.compiler.runtime.cache import open_cache
    from evoharness.compiler.runtime.workload import live_tools, shipped_doctor_record
    from evoharness.compiler.secrets import public_url
    from evoharness.search.evaluation.coverage import coverage_warning
    from evoharness.search.evaluation.evaluate import evaluate_variant_async
    from evoharness.search.records import doctor_record as doctor
    from evoharness.search.records import transcripts
    from evoharness.search.records.provenance import provenance
    from evoharness.search.records.tables import metrics_table
    from evoharness.search.records.versions import versioned

    snapshot = promoted_for(cfg)  # the release this evaluation runs on, named in its record and a sweep's table
    cfg = released(cfg)
    variant = compile_config(cfg)
    workload = make_workload(cfg)
    tasks = chosen_tasks(cfg, workload)
    gap = coverage_warning([t.name for t in variant.tools], tasks, where=str(cfg.workload.split))
    if gap:
        print_whole(gap, sys.stderr)
    def digest() -> str:
        return doctor.workload_hash(workload, workload_options(cfg), tools=[t.name for t in variant.tools],
                                    max_turns=variant.max_turns)

    unchecked = doctor.warning(doctor.status(str(cfg.runs_dir), workload.name, digest, shipped=shipped_doctor_record(workload)),
                               workload.name)
    if unchecked:
        print_whole(unchecked, sys.stderr)
    samples = int(cfg.workload.samples)
    out = Path(HydraConfig.get().runtime.output_dir) / "eval.json"
    if str(cfg.workload.split) == "holdout":  # unsealed on purpose: the look is journaled before it is taken
        check_seal(cfg)
        from evoharness.search.records.looks import RegistryLooks, Seal, holdout_hash, registry_row

        held = workload.tasks("holdout")
        seal = Seal(holdout_hash=holdout_hash(str(cfg.workload.name), [t.task_id for t in held]),
                    clusters=frozenset(t.cluster for t in held))
        with RegistryLooks(str(cfg.registry_dir)).locked() as looks:
            looks.append(registry_row(variant_hash=variant.content_hash, by="evaluate", seal=seal, tasks=len(tasks), eval=str(out)))
        print_whole(f"holdout look recorded in {looks.path}: a search's claim on this split counts it", sys.stderr)
    with ctrl_c_stops() as stopping:
        report, trajectories = asyncio.run(evaluate_variant_async(
            variant,
            workload,
            checked_split(cfg.workload.split),  # chosen_tasks refused any other
            samples=samples,
            concurrency=int(cfg.workload.concurrency),
            seed=int(cfg.seed),
            tasks=tasks,
            cache=open_cache(cfg.cache_dir) if cfg.cache_dir else None,
            progress=len(tasks) * samples >= 20,
            keep_trajectories=True,
            stop=stopping.is_set,
        ))
    # stopped before every episode ran (a Ctrl-C after the last one started stops nothing)
    partial = stopping.is_set() and len(report.episodes) + int(report.metrics.get("samples_skipped", 0)) < len(tasks) * samples
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    if resolved.get("search", {}).get("storage"):
        resolved["search"]["storage"] = public_url(str(resolved["search"]["storage"]))  # never a database password
    record = versioned("eval", {
        "variant_hash": variant.content_hash,
        "split": str(cfg.workload.split),
        "model": variant.model.route,
        "metrics": dict(report.metrics),
        # false: a route has no price, so every cost below is null (unknown), never $0
        "priced": not report.metrics.get("unpriced_episodes"),
        # a warm run replays from the response cache: what it paid, and what it would have cost without the cache
        "billing": {"billed_cost": report.metrics.get("billed_cost"), "billed_tokens": report.metrics.get("billed_tokens", 0.0),
                    "cost_if_uncached": report.metrics.get("cost_total")},
        "tasks": report.to_dict()["tasks"],
        "episodes": report.to_dict()["episodes"],
        "config": resolved,
        "provenance": provenance(resolved, tasks, packages=tuple(getattr(workload, "packages", ()) or ())),
        "live_tools": list(live_tools(workload)),  # tools that called their service (no replayed snapshot): outputs may drift
        "partial": partial,  # stopped by Ctrl-C: only the episodes that ran
        "release": None if snapshot is None else {"slot": str(cfg.release_slot), "snapshot": snapshot.content_hash,
                                                  "component": snapshot.component},
    })
    transcripts.write(out, transcripts.pack(report.episodes, trajectories))  # first: a record has its transcripts beside it
    write_text_atomic(out, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    label = f"{variant.model.route} {variant.content_hash[:10]}"
    hydra = HydraConfig.get()
    if hydra.mode == RunMode.MULTIRUN:  # one line a job: the sweep's table across all of them comes at its end
        from evoharness.compiler.secrets import scrub
        from evoharness.search.records.sweep import job_line

        print_whole(scrub(job_line(int(hydra.job.num), list(hydra.overrides.task), report.metrics, priced=bool(record["priced"]))))
    else:
        print_whole(metrics_table([(label, report)]))
    print_whole(f"eval: {out}", sys.stderr)
    if partial:
        raise RunFailed(f"stopped by Ctrl-C after {len(report.episodes)} of {len(tasks) * samples} episodes: {out} holds them, "
                        "marked partial. Fix: run the same command again to evaluate every task (the replies already paid for "
                        "come from the response cache)", result=report)
    why = too_many_skipped(report.episodes, check_max_skip_rate(cfg.workload.get("max_skip_rate", DEFAULT_MAX_SKIP_RATE)))
    if why:  # the record stays: a rerun once the route is up pays only for what was skipped
        raise RunFailed(f"{why}. Fix: rerun once what failed answers again (replies already paid for come from the "
                        "response cache), or raise workload.max_skip_rate", result=report)
    return report


def search_task(cfg: DictConfig) -> Any:
    """A search job: the spec the nsga2 sweeper put in its override, compiled and evaluated."""
    from evoharness.search.optimise.trial import TrialSpec, run_trial

    if "trial" not in cfg:
        raise ConfigError("hydra/sweeper", "the search runs as a multirun under the nsga2 sweeper",
                          "run `evoharness search` (it adds -m and hydra/sweeper=nsga2)")
    from evoharness.search.optimise.trial import JobInputError, job_signals

    job_signals()
    try:
        return run_trial(TrialSpec.decode(str(cfg.trial)))
    except ConfigError as exc:  # back to the orchestrator as this job's failure, not as the job process's exit
        raise JobInputError(exc) from None


def search_validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> object:
    """The evaluate checks, then the search's settings built exactly as the sweeper builds them, from
    the released config (which validates every search, criteria and mutator setting) before anything
    is paid for."""
    from evoharness.search.optimise.settings import search_settings
    from evoharness.search.optimise.study import check_storage

    variant = evaluate_validate(cfg, overrides)  # refuses +trial=..., the sweeper's own per-job setting
    from evoharness.compiler.refusals import writable_dir

    if not str(cfg.get("registry_dir") or "").strip():
        raise ConfigError("registry_dir", "is empty, and a search stores its champion and journals its holdout look in the registry",
                          "set registry_dir (default ${runs_dir}/registry)")
    writable_dir("registry_dir", cfg.registry_dir)  # the champion's snapshot and the holdout looks go there
    workload = make_workload(cfg)
    empty = [split for split in SPLITS if not workload.tasks(split)]
    if empty:  # a search tunes on train, selects on dev and claims on holdout: each needs tasks
        raise ConfigError("workload", f"workload {workload.name!r} has no {' or '.join(empty)} tasks",
                          "give every split tasks (a tasks file: declare splits, or let enough tasks be hashed)")
    settings = search_settings(cfg, overrides)
    from evoharness.search.optimise.freeze import refuse_live_tools

    refuse_live_tools(workload, live_ok=settings.search.live_ok)  # before Hydra makes a folder; the freeze checks it again
    refuse_underpowered(settings, workload)
    if settings.search.storage:
        check_storage(settings.search.storage)
    named = [(f"search.models.{name}", m) for name, m in settings.models.items() if name != "base"]
    for path, m in [*named, *([("search.teacher", settings.teacher)] if settings.teacher else [])]:
        check_model(path, route=str(m["route"]), params=m.get("extra") or {}, api_key_env=m.get("api_key_env"),
                    api_base=m.get("api_base"))
    from evoharness.search.cli.spend_checks import check_spend

    check_spend(settings, workload)  # every counted route priced, and a cap the baseline and the finish fit in
    return variant


def refuse_underpowered(settings: RunSettings, workload: Workload) -> None:
    """Refuse, before anything is paid for, splits too small for the decision rule's question
    (search/evaluation/power.py), unless search.allow_underpowered=true (then every claim says so)."""
    from evoharness.search.evaluation.criteria import quality_objective
    from evoharness.search.evaluation.power import split_power

    found = split_power(workload.tasks("holdout"), workload.tasks("dev"), samples=settings.search.samples,
                        margin=settings.rule.bar, confidence=settings.search.confidence,
                        metric=quality_objective(settings.objectives)).problems()
    if found and not settings.search.allow_underpowered:
        what, fix = found[0]
        raise ConfigError("criteria.margin", what, f"{fix}; or pass search.allow_underpowered=true (the claim then says so)")


def power_line(cfg: DictConfig, workload: Workload) -> str:
    """The doctor's line on whether the splits can answer the configured decision's question."""
    from evoharness.search.evaluation.decision import decision_rule
    from evoharness.search.evaluation.power import split_power

    rule = decision_rule(str(cfg.criteria.get("decision", "cheapest_noninferior")), margin=float(cfg.criteria.get("margin", 0.05)))
    found = split_power(workload.tasks("holdout"), workload.tasks("dev"), samples=int(cfg.search.samples), margin=rule.bar,
                        confidence=float(cfg.search.confidence))
    head = (f"power ({rule.name}): holdout {found.holdout_clusters} clusters of {found.holdout_tasks} tasks, interval reach "
            f"{found.reach:.3f}" + (f" against margin {found.margin:g}" if found.margin is not None else "")
            + (f"; dev step {found.dev_step:.3f}" if found.dev_step else ""))
    problems = found.problems()
    return head + (": " + "; ".join(f"{what}. Fix: {fix}" for what, fix in problems) if problems else ": can be shown")


def doctor_validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> HarnessVariant:
    """The config compiles and the workload builds; the doctor reads every split (gold only: no
    agent is measured, so the holdout's seal is not touched)."""
    from evoharness.compiler.cli import compile_validate
    from evoharness.search.records.doctor_record import record_path

    variant = compile_validate(cfg, overrides)
    workload = make_workload(cfg)
    record_path(str(cfg.runs_dir), workload.name, "0" * 16)  # the record's file name must be a plain name
    folder = Path(str(cfg.runs_dir)) / "doctor"
    if folder.exists() and not folder.is_dir():
        raise ConfigError("runs_dir", f"{folder} is a file, and the doctor's records go in that folder", "move the file away")
    limit = cfg.workload.limit
    if limit is not None and int(limit) < 1:
        raise ConfigError("workload.limit", f"must be positive or null, got {limit}", "set workload.limit=null for all tasks")
    return variant


MAX_LISTED = 25  # gold replay failures the doctor lists one by one: more than that is a workload to fix at its root


def doctor_task(cfg: DictConfig) -> None:
    """`evoharness doctor`: the workload check on every split (``workload.limit`` tasks of each)."""
    from evoharness.compiler.cli import released
    from evoharness.search.evaluation.doctor import doctor_table, run_doctor
    from evoharness.search.records.doctor_record import record_path, workload_hash, write_record

    variant = compile_config(released(cfg))
    workload = make_workload(cfg)
    power = power_line(cfg, workload)  # a bad criteria.decision fails here, before the replay
    limit = None if cfg.workload.limit is None else int(cfg.workload.limit)
    tasks = [t for split in SPLITS for t in list(workload.tasks(split))[:limit]]
    total = sum(len(workload.tasks(split)) for split in SPLITS)
    report = run_doctor(variant, workload, tasks, seed=int(cfg.seed), concurrency=int(cfg.workload.concurrency))
    digest = workload_hash(workload, workload_options(cfg), tools=[t.name for t in variant.tools],
                           max_turns=variant.max_turns)
    path = record_path(str(cfg.runs_dir), workload.name, digest)
    gates = report.gates()
    write_record(path, workload=workload.name, digest=digest, passed=report.passed, gates=gates, rows=report.split_rows(),
                 checked=len(tasks), total=total)
    from evoharness.compiler.secrets import scrub

    failures = report.failures()
    shown = failures if len(failures) <= MAX_LISTED else failures[:MAX_LISTED - 1]
    lines = [f"doctor: workload {workload.name!r}, {len(tasks)} of {total} tasks, hash {digest[:12]}", doctor_table(report),
             *[f"  gold replay failed: {failure}" for failure in shown],
             *([f"  and {len(failures) - len(shown)} more gold replay failures (workload.limit=N checks fewer tasks)"]
               if len(shown) < len(failures) else []),
             "gates: " + ", ".join(f"{name} {'n/a' if ok is None else 'PASS' if ok else 'FAIL'}" for name, ok in gates.items()),
             power]
    print_whole(scrub("\n".join(lines)))  # a tool's error text may carry an environment value
    print_whole(f"record: {path}", sys.stderr)
    if not report.passed:
        raise SystemExit(1)
