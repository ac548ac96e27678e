"""A search run: freeze, baseline, NSGA-II rounds with mutators between them, dev selection,
the sealed holdout claim, and the records (ledger, registry snapshots, results, report).

Jobs are handed to a ``launch`` callable (the Hydra sweeper passes its launcher), so this module
holds the loop and nothing about how a job is executed.
"""
from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, ListConfig, OmegaConf

from compiler.atomic import write_json_atomic
from compiler.catalog import build_catalog, select_tools
from compiler.errors import ConfigError
from compiler.provenance import git_revision
from compiler.runtime.cache import ResponseCache
from compiler.runtime.workload import Workload, workload_factory
from compiler.secrets import public_url
from compiler.variant import content_hash
from search.evaluation.claim import scorer_hash
from search.evaluation.criteria import build_criteria, constraint_values, evaluate_criteria, objective_values, objectives
from search.evaluation.metrics import EvalReport
from search.genome import BASELINE, Genome, Pools, authors, genome_to_params, initial_pools, param_space, params_to_genome
from search.mutators.base import Evidence, MutationContext, grow_pools, make_mutator
from search.optimise.models_conf import load_model_config
from search.optimise.study import distinct_evaluations, distributions, fail_stale, finished, make_sampler, round_study
from search.optimise.trial import TrialSpec
from search.records.provenance import tasks_hash

Launch = Callable[[Sequence[TrialSpec]], list[dict[str, Any] | BaseException]]
# search settings that change what a resumed study means (budget keys may change on resume)
FROZEN_SEARCH_KEYS = ("seed", "models", "temperatures", "formats", "samples", "train_limit", "crossover", "population_size",
                      "teacher", "confidence", "min_effect", "resamples", "max_front_dev")
CONTROL_SEED_STRIDE = 7919  # identity controls draw fresh samples: a different seed per round


class SearchAborted(RuntimeError):
    """More trials failed than search.max_failure_rate allows."""


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


class SearchRun:
    def __init__(self, cfg: DictConfig, *, launch: Launch, conf_dir: str, echo: Callable[[str], None] = print) -> None:
        self.cfg, self.s, self.launch, self.echo = cfg, cfg.search, launch, echo
        self.conf_dir = conf_dir
        self.dir = Path(cfg.runs_dir).resolve() / str(self.s.study)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.storage = str(self.s.storage or f"sqlite:///{self.dir / 'study.db'}")
        self.storage_public = public_url(self.storage)  # what records and reports may show
        self.agent, self.tool = _plain(cfg.agent), _plain(cfg.tool)
        self.models = {"base": _plain(cfg.model)}
        for name in self.s.models:
            m = load_model_config(str(name), conf_dir)
            if m["route"] != self.models["base"]["route"]:
                self.models[str(name)] = m
        self.criteria = build_criteria(cfg.criteria)
        self.aggregation = str(cfg.criteria.aggregation)
        self.objectives = objectives(self.criteria)
        options: dict[str, Any] = _plain(cfg.workload.options) or {}
        self.workload_cfg: dict[str, Any] = {"name": str(cfg.workload.name), "options": options, "concurrency": int(cfg.workload.concurrency)}
        self.workload: Workload = workload_factory(str(cfg.workload.name))(**options)
        limit = self.s.train_limit
        self.task_ids = {
            "train": tuple(t.task_id for t in list(self.workload.tasks("train"))[: (int(limit) if limit else None)]),
            "dev": tuple(t.task_id for t in self.workload.tasks("dev")),
            "holdout": tuple(t.task_id for t in self.workload.tasks("holdout")),
        }
        self.seed = int(cfg.seed)
        self.config_hash = ""  # set by freeze()
        self.mutators = [(make_mutator(str(m.name), **(_plain(m.params) or {})), float(m.weight)) for m in cfg.mutators.enabled]

    # -- freeze -------------------------------------------------------------------------
    def freeze(self) -> dict[str, Any]:
        frozen = {
            "config_hash": content_hash({"agent": self.agent, "tool": self.tool, "models": self.models, "workload": self.workload_cfg,
                                         "criteria": _plain(self.cfg.criteria), "mutators": _plain(self.cfg.mutators), "seed": self.seed,
                                         "search": {k: _plain(self.s[k]) for k in FROZEN_SEARCH_KEYS}}),
            "workload_hash": content_hash([tasks_hash([self.workload.task(t) for t in ids]) for ids in self.task_ids.values()]),
            "splits_hash": content_hash({k: list(v) for k, v in self.task_ids.items()}),
            "scorer_hash": scorer_hash(self.workload),
            "seed": self.seed,
        }
        self.config_hash = str(frozen["config_hash"])
        path = self.dir / "freeze.json"
        if path.exists():
            before = json.loads(path.read_text(encoding="utf-8"))
            changed = [k for k in frozen if before.get(k) != frozen[k]]
            if changed:
                raise ConfigError("search.study", f"study {self.s.study!r} was started with a different {', '.join(changed)}",
                                  f"resume with the same config, pick a new search.study, or delete {self.dir}")
            return before
        resolved: dict[str, Any] = OmegaConf.to_container(self.cfg, resolve=True)  # type: ignore[assignment]
        resolved["search"]["storage"] = self.storage_public
        write_json_atomic(path, {**frozen, "created_at": datetime.now(UTC).isoformat(), "git_revision": git_revision(),
                                 "resolved_config": resolved})
        return frozen

    # -- jobs ---------------------------------------------------------------------------
    def spec(self, genome: Genome, pools: Pools, split: str, label: str, *, seed: int | None = None) -> TrialSpec:
        return TrialSpec(
            study_dir=str(self.dir), label=label, split=split, genome=genome, pools=pools, agent=self.agent, tool=self.tool, models=self.models,
            workload=self.workload_cfg, task_ids=self.task_ids[split], samples=int(self.s.samples), seed=self.seed if seed is None else seed,
            cache_dir=str(Path(self.cfg.cache_dir).resolve()) if self.cfg.cache_dir else None,
        )

    def run_jobs(self, specs: Sequence[TrialSpec]) -> list[dict[str, Any] | BaseException]:
        results = self.launch(specs)
        if len(results) != len(specs):
            raise RuntimeError(f"launcher returned {len(results)} results for {len(specs)} jobs")
        return results

    # -- rounds -------------------------------------------------------------------------
    def pools_for(self, k: int, previous: Pools | None, front: Sequence[optuna.trial.FrozenTrial]) -> tuple[Pools, list[Any], list[Any]]:
        path = self.dir / "pools" / f"r{k}.json"
        if path.exists():  # resumed: the pools this round already searched over (LLM mutators are not re-paid)
            stored = json.loads(path.read_text(encoding="utf-8"))
            return Pools.from_dict(stored["pools"]), stored.get("added", []), stored.get("controls", [])
        if previous is None:
            pools = initial_pools(self.agent, models=list(self.models)[1:], temperatures=list(self.s.temperatures),
                                  base_model="base", base_temperature=float(self.models["base"].get("temperature", 0.0)))
            base_format = str(self.agent.get("tool_format", "json"))
            pools = replace(pools, formats=tuple(dict.fromkeys([base_format, *map(str, self.s.formats)])))
            added: list[dict[str, Any]] = []
            controls: list[dict[str, Any]] = []
        else:
            pools, added, controls = self.mutate(k, previous, front)
        write_json_atomic(path, {"pools": pools.to_dict(), "added": added, "controls": controls})
        return pools, added, controls

    def mutate(self, k: int, pools: Pools, front: Sequence[optuna.trial.FrozenTrial]) -> tuple[Pools, list[dict[str, Any]], list[dict[str, Any]]]:
        evidence = tuple(self.evidence(front))
        ctx = MutationContext(agent=self.agent, tools={s.name: s for s in select_tools(self.agent["tools"], build_catalog(self.tool))}, pools=pools,
                              front=tuple(Genome.from_dict(t.user_attrs["genome"]) for t in front), evidence=evidence,
                              models=tuple(self.models), round=k, run_teacher=self.teacher_runner(pools),
                              cache_dir=str(Path(self.cfg.cache_dir).resolve()) if self.cfg.cache_dir else None)
        proposals: list[Any] = []
        for m, weight in self.mutators:
            rng = random.Random(content_hash([int(self.s.seed), k, m.name]))
            if weight < 1.0 and rng.random() >= weight:  # a weight below 1 is the chance it runs this round
                continue
            try:
                proposals += list(m.propose(ctx, rng=rng))
            except Exception as exc:  # one broken mutator (e.g. its LLM route is down) must not end the search
                self.echo(f"warning: mutator {m.name} failed in round {k}: {type(exc).__name__}: {exc}")
        cap = int(self.cfg.mutators.pool_size)
        grown, added, controls = grow_pools(pools, proposals, cap=lambda ps, kind, key: _pool_len(ps, kind, key) < cap)
        return (grown, [{"kind": p.kind, "key": p.key, "author": p.entry.author, "note": p.entry.note} for p in added],
                [{"genome": c.genome.to_dict(), "author": c.author} for c in controls])

    def teacher_runner(self, pools: Pools) -> Callable[[Sequence[str]], dict[str, list[str]]] | None:
        """Runs search.teacher (a stronger model) with the baseline harness on failing train tasks."""
        if not self.s.teacher:
            return None
        from compiler.variant import compile_agent

        teacher = load_model_config(str(self.s.teacher), self.conf_dir, path="search.teacher")

        def run(task_ids: Sequence[str]) -> dict[str, list[str]]:
            import asyncio

            from search.evaluation.evaluate import evaluate_variant_async

            variant = compile_agent(self.agent, tool=self.tool, model=teacher)
            tasks = [self.workload.task(t) for t in task_ids]
            cache = ResponseCache(Path(self.cfg.cache_dir).resolve()) if self.cfg.cache_dir else None  # a resumed round does not pay twice
            _, trajectories = asyncio.run(evaluate_variant_async(variant, self.workload, "train", tasks=tasks, seed=self.seed, cache=cache, keep_trajectories=True))
            return {t.task_id: [f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in t.tool_calls if c.error is None] for t in trajectories}

        return run

    def evidence(self, front: Sequence[optuna.trial.FrozenTrial]) -> list[Evidence]:
        out: list[Evidence] = []
        for t in front:
            stored = self.dir / "evals" / f"{t.user_attrs.get('eval_key')}.json"
            if stored.exists():
                data = json.loads(stored.read_text(encoding="utf-8"))
                g = Genome.from_dict(t.user_attrs["genome"])
                out += [Evidence(e["task_id"], e["detail"], tuple(e.get("tool_errors", [])), g) for e in data.get("evidence", [])]
        return out

    def enqueue(self, study: optuna.Study, k: int, pools: Pools, front: Sequence[optuna.trial.FrozenTrial], added: list[dict[str, Any]], controls: list[dict[str, Any]]) -> None:
        base_format = str(self.agent.get("tool_format", "json"))
        base_steps = {s["name"]: bool(s.get("enabled", True)) for s in self.agent.get("workflow", [])}  # every base step: a pooled required step is on by default

        def params(g: Genome) -> dict[str, Any]:
            return genome_to_params(g, pools, base_format=base_format, base_steps=base_steps)

        # Priority within the round's budget: the baseline, the identity controls (fresh samples
        # of known genomes: the noise yardstick), the previous front, then each new pool entry.
        queue: list[tuple[dict[str, Any], dict[str, Any]]] = [(params(BASELINE), {"origin": "baseline"})]
        if k == 0:  # the first generation measures every gene's main effect: one change at a time
            base_params = params(BASELINE)
            for name, choices in param_space(pools).items():
                queue += [({**base_params, name: c}, {"origin": "one_change"}) for c in choices if c != base_params[name]]
        queue += [(params(Genome.from_dict(c["genome"])), {"origin": "control", "control": c["author"]}) for c in controls]
        best = [Genome.from_dict(t.user_attrs["genome"]) for t in front]
        queue += [(params(g), {"origin": "front"}) for g in best]
        # New entries are tried on two ends of the front: the best quality and the lowest cost, so
        # an edit that lifts a cheap configuration gets its chance as well as one that polishes the best.
        anchors = [BASELINE]
        if front:
            q = next((o.metric for o in self.objectives if o.direction == "maximize"), "score_mean")
            by_quality = max(front, key=lambda t: float(t.user_attrs.get("train", {}).get(q, 0.0)))
            # the cheapest member that already beats the baseline (else the cheapest): the knee to lift
            base_q = next((float(t.user_attrs.get("train", {}).get(q, 0.0)) for t in front if t.user_attrs.get("origin") == "baseline"), 0.0)
            better = [t for t in front if float(t.user_attrs.get("train", {}).get(q, 0.0)) > base_q] or list(front)
            by_cost = min(better, key=lambda t: float(t.user_attrs.get("train", {}).get("cost_per_task", 0.0)))
            anchors = [Genome.from_dict(t.user_attrs["genome"]) for t in ([by_quality] if by_quality.number == by_cost.number else [by_quality, by_cost])]
        base_names = [st["name"] for st in self.agent.get("workflow", [])]
        for a in added:
            for anchor in anchors:
                g = _with_new_entry(anchor, pools, a, base_names)
                if g is not None:
                    queue.append((params(g), {"origin": f"new:{a['author']}"}))
        unique: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for p, attrs in queue:
            unique.setdefault(json.dumps(p, sort_keys=True) + str(attrs.get("control")), (p, attrs))
        for p, attrs in list(unique.values())[: int(self.s.trials_per_round)]:
            study.enqueue_trial(p, user_attrs=attrs)

    def run_round(self, k: int, pools: Pools, front: Sequence[optuna.trial.FrozenTrial], added: list[dict[str, Any]], controls: list[dict[str, Any]]) -> optuna.Study:
        study = round_study(self.storage, str(self.s.study), k, self.objectives, make_sampler(population_size=int(self.s.population_size), seed=int(self.s.seed) + k, crossover=str(self.s.crossover)))
        if not study.get_trials(deepcopy=False):
            self.enqueue(study, k, pools, front, added, controls)
        for p, attrs in fail_stale(study):
            study.enqueue_trial(p, user_attrs={**attrs, "rerun": True})
        dists = distributions(param_space(pools))
        budget = int(self.s.trials_per_round)
        asks_left = 3 * budget  # repeats are free but not endless: a tiny space can run out of new genomes
        while (remaining := budget - distinct_evaluations(study)) > 0 and asks_left > 0:
            trials = [study.ask(dists) for _ in range(min(int(self.s.population_size), remaining, asks_left))]
            asks_left -= len(trials)
            for t in trials:
                # enqueued trials have every param fixed, and Optuna then never consults the sampler,
                # so NSGA-II would not count them in a generation (nor use them as parents)
                _ = t.relative_params
            specs = []
            for t in trials:
                control = t.user_attrs.get("control")
                seed = self.seed + CONTROL_SEED_STRIDE * (k + 1) if control else None
                specs.append(self.spec(params_to_genome(t.params), pools, "train", f"r{k}-t{t.number}", seed=seed))
            for t, spec, res in zip(trials, specs, self.run_jobs(specs)):
                self.tell(study, t, spec, pools, res)
            done = finished(study)
            failed = sum(1 for t in done if t.state == optuna.trial.TrialState.FAIL)
            if len(done) >= int(self.s.population_size) and failed / len(done) > float(self.s.max_failure_rate):
                first = next((str(t.user_attrs["error"]) for t in done if t.user_attrs.get("error")), "see the job logs under the sweep dir")
                raise SearchAborted(f"{failed} of {len(done)} trials failed in round {k} (search.max_failure_rate={self.s.max_failure_rate}); first error: {first}")
        return study

    def tell(self, study: optuna.Study, trial: optuna.Trial, spec: TrialSpec, pools: Pools, res: dict[str, Any] | BaseException) -> None:
        trial.set_user_attr("genome", spec.genome.to_dict())
        trial.set_user_attr("authors", list(authors(spec.genome, pools, [s["name"] for s in self.agent.get("workflow", [])])))
        if isinstance(res, BaseException):
            trial.set_user_attr("error", f"{type(res).__name__}: {res}"[:500])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        report = EvalReport.from_dict(res["report"])
        metrics = dict(report.metrics)
        values = objective_values(report, self.criteria, self.objectives)
        trial.set_user_attr("variant_hash", res["variant_hash"])
        trial.set_user_attr("eval_key", spec.eval_key(res["variant_hash"]))
        trial.set_user_attr("train", metrics)
        if any(v is None for v in values):
            missing = [o.metric for o, v in zip(self.objectives, values) if v is None]
            why = ("no scored episode: every episode was skipped as an infrastructure failure" if not metrics.get("scored")
                   else f"objective metric(s) {missing} could not be measured on this report")
            trial.set_user_attr("error", why)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        verdict = evaluate_criteria(report, self.criteria, self.aggregation)
        # Hard criteria are Optuna constraints (<= 0 feasible): NSGA-II ranks and best_trials filter by them.
        for c, value in zip([c for c in self.criteria if c.hard], constraint_values(verdict)):
            trial.set_constraint(c.name, value)
        trial.set_user_attr("feasible", verdict.feasible)
        study.tell(trial, values=[float(v) for v in values if v is not None])

    # -- whole run ----------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        from search.optimise.finish import finish  # the selection, claim and records

        frozen = self.freeze()
        pools: Pools | None = None
        studies: list[optuna.Study] = []
        front: list[optuna.trial.FrozenTrial] = []
        for k in range(int(self.s.rounds)):
            pools, added, controls = self.pools_for(k, pools, front)
            studies.append(self.run_round(k, pools, front, added, controls))
            front = list(studies[-1].best_trials)
            self.echo(f"round {k}: {distinct_evaluations(studies[-1])} distinct evaluations in {len(finished(studies[-1]))} trials, "
                      f"front of {len({t.user_attrs.get('variant_hash') for t in front})} variants")
        assert pools is not None
        return finish(self, frozen, studies, pools)


def _pool_len(pools: Pools, kind: str, key: str | None) -> int:
    if kind == "section":
        return len(pools.sections.get(key or "", ()))
    if kind == "tool":
        return len(pools.tools.get(key or "", ())) or 1
    if kind == "step":
        return 0
    return len(getattr(pools, {"toolset": "toolsets", "model": "models", "temperature": "temperatures"}[kind]))


def _with_new_entry(g: Genome, pools: Pools, added: dict[str, Any], base_steps: Sequence[str] = ()) -> Genome | None:
    kind, key = added["kind"], added["key"]
    if kind == "section":
        return replace(g, sections={**g.sections, key: len(pools.sections[key]) - 1})
    if kind == "tool":
        return replace(g, tools={**g.tools, key: len(pools.tools[key]) - 1})
    if kind == "step":  # a new step is tried on; a required step made switchable is tried off
        return replace(g, steps={**g.steps, key: key not in base_steps})
    if kind == "toolset":
        return replace(g, toolset=len(pools.toolsets) - 1)
    if kind == "model":
        return replace(g, model=len(pools.models) - 1)
    if kind == "temperature":
        return replace(g, temperature=len(pools.temperatures) - 1)
    return None


__all__ = ["EvalReport", "Launch", "SearchAborted", "SearchRun"]
