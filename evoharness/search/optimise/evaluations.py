"""A search's evaluations: a genome's job spec on the latest pools, its compiled variant (compiled
once), and each evaluation read back from the study's store when it is there, else launched and
stored. Only the orchestrator touches runs/<study>/: a job on another machine needs no shared
filesystem."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Split
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.genome import Genome, Pools, canonical
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.trial import JobInputError, TrialResult, TrialSpec, stored_result
from evoharness.search.records import transcripts
from evoharness.search.records.spend import append_spend, spend_row

Launch = Callable[[Sequence[TrialSpec]], list[TrialResult | BaseException]]


class SearchInterrupted(RuntimeError):
    """The user asked the search to stop (SIGINT/SIGTERM); what finished is kept."""


class Evaluations:
    """The evaluations of one search, on the pools of its latest round (``pools``: every genome of
    the search indexes into them, and pool indices never change meaning)."""

    def __init__(self, settings: RunSettings, paths: StudyPaths, task_ids: Mapping[str, tuple[str, ...]], *, launch: Launch,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.settings, self.paths, self.task_ids, self.launch = settings, paths, task_ids, launch
        self.should_stop = should_stop
        self.pools: Pools | None = None
        self._variants: dict[str, HarnessVariant] = {}  # genome -> compiled variant, so nothing is compiled twice

    def spec(self, genome: Genome, split: Split, label: str, *, seed: int | None = None) -> TrialSpec:
        st = self.settings
        assert self.pools is not None, "a spec needs the round's pools"
        return TrialSpec(
            label=label, split=split, genome=genome, pools=self.pools, agent=st.agent, tool=st.tool,
            models=st.models, workload=st.workload, task_ids=self.task_ids[split], samples=st.search.samples,
            seed=st.seed if seed is None else seed, cache_dir=st.cache_dir,
        )

    def genome_key(self, genome: Genome) -> str:
        st = self.settings
        return json.dumps(canonical(genome, base_format=st.base_format, base_steps=st.base_steps).to_dict(), sort_keys=True)

    def variant_of(self, genome: Genome) -> HarnessVariant:
        """The compiled variant of a genome under the latest pools (pool indices never change meaning)."""
        key = self.genome_key(genome)
        if key not in self._variants:
            self._variants[key] = self.spec(genome, "train", "compile").variant()
        return self._variants[key]

    def remember(self, genome: Genome, variant: HarnessVariant) -> None:
        """A job's compiled variant, kept so the orchestrator does not compile it again."""
        self._variants.setdefault(self.genome_key(genome), variant)

    def run_jobs(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        """Each spec's evaluation: read back from the study's store when it is there (no job is
        launched for it), else launched, and its result stored here."""
        out: list[TrialResult | BaseException | None] = []
        expected: dict[int, tuple[HarnessVariant, Path]] = {}
        first: dict[Path, int] = {}  # a genome asked twice in one batch is evaluated once
        for i, spec in enumerate(specs):
            variant = self.variant_of(spec.genome)
            path = self.paths.evals / f"{spec.eval_key(variant.content_hash)}.json"
            stored = stored_result(path, variant)  # one that cannot be read stops the search with its one line
            out.append(None if stored is None else replace(stored, label=spec.label))
            if stored is None:
                expected[i] = (variant, path)
                first.setdefault(path, i)
        todo = sorted(first.values())
        results = self.launch([specs[i] for i in todo]) if todo else []
        if len(results) != len(todo):
            raise RuntimeError(f"launcher returned {len(results)} results for {len(todo)} jobs")
        for i, res in zip(todo, results):  # before anything is stored: a batch from another build is refused whole
            if isinstance(res, TrialResult) and res.variant_hash != expected[i][0].content_hash:
                raise ConfigError("hydra/launcher", f"a job compiled variant {res.variant_hash[:12]} where this process compiled "
                                  f"{expected[i][0].content_hash[:12]} from the same genome: the machine that ran it has another "
                                  "evoharness, agent template or tool catalog", "install the same evoharness revision on every machine")
        by_path: dict[Path, TrialResult | BaseException] = {}
        for i, res in zip(todo, results):
            path = expected[i][1]
            if isinstance(res, TrialResult) and not res.report.metrics.get("skipped"):
                # an evaluation with skipped episodes is not final: a resume retries them (the response
                # cache replays every finished model call, so only the failed ones are paid again)
                transcripts.write(path, res.transcripts)  # first: a record on disk has its transcripts beside it
                write_json_atomic(path, res.to_dict())
            by_path[path] = res.error if isinstance(res, JobInputError) else res
        for i, (_, path) in expected.items():
            res = by_path[path]
            out[i] = res if first[path] == i or not isinstance(res, TrialResult) else replace(res, label=specs[i].label, reused=True)
        append_spend(self.paths.spend, [
            spend_row(eval_key=spec.eval_key(r.variant_hash), label=spec.label, split=spec.split, variant_hash=r.variant_hash,
                      metrics=r.report.metrics, model_calls=sum(e.model_calls for e in r.report.episodes))
            for spec, r in zip(specs, out) if isinstance(r, TrialResult) and not r.reused])
        # bad input a job found stops the search with its one line, once every finished result of the
        # batch is stored and journaled; the failed trials stay RUNNING, and a resume re-runs them
        bad = next((r for r in out if isinstance(r, ConfigError)), None)
        if bad is not None:
            raise bad
        return [r for r in out if r is not None]

    def evaluate(self, jobs: Sequence[tuple[Genome, Split, str]]) -> list[TrialResult | BaseException]:
        """Evaluate (genome, split, label) jobs on the latest pools."""
        if self.should_stop():  # dev and holdout evaluations already stored are read back on resume
            raise SearchInterrupted("stopped by request")
        results = self.run_jobs([self.spec(g, split, label) for g, split, label in jobs])
        for (g, _, _), res in zip(jobs, results):
            if isinstance(res, TrialResult):
                self.remember(g, res.variant)
        return results
