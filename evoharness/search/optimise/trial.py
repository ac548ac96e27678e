"""One search job: a genome compiled and evaluated on a split. The unit the Hydra launcher runs.

The sweeper hands each job a self-contained spec (base configs, pools, genome, split, samples,
seed, task ids) inside the job's own override, and the job's whole answer (report, evidence, the
compiled variant) comes back as its return value. So a job reads and writes nothing of the study:
any launcher (in-process, joblib, Ray, Submitit) runs it the same way, on machines that share no
filesystem with the orchestrator. Only the orchestrator keeps finished evaluations, under
runs/<study>/evals/, keyed by variant hash, split, samples, seed and tasks, so a resumed search
never pays for one twice (and never launches a job to read one back).
"""
from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import re
import select
import signal
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.compiler.configpath import portable_options
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.cache import open_cache
from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.runtime.workload import Failure, Split, checked_split, workload_factory
from evoharness.compiler.secrets import restore, scrub
from evoharness.compiler.variant import HarnessVariant, compile_agent, content_hash
from evoharness.search.evaluation.metrics import EvalReport
from evoharness.search.genome import Genome, Pools, genome_to_config
from evoharness.search.mutators.base import FailedEpisode
from evoharness.search.records import transcripts
from evoharness.search.records.versions import checked, versioned


@dataclass(frozen=True)
class WorkloadSettings:
    name: str
    options: Mapping[str, Any]
    concurrency: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(self.options), "concurrency": self.concurrency}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkloadSettings:
        return cls(name=str(d["name"]), options=dict(d.get("options", {})), concurrency=int(d["concurrency"]))


@dataclass(frozen=True)
class TrialSpec:
    label: str  # e.g. "r0-t3-train" or "baseline-dev"
    split: Split
    genome: Genome
    pools: Pools
    agent: Mapping[str, Any]
    tool: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]
    workload: WorkloadSettings
    task_ids: tuple[str, ...]
    samples: int
    seed: int
    cache_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "split": self.split, "genome": self.genome.to_dict(),
            "pools": self.pools.to_dict(), "agent": dict(self.agent), "tool": dict(self.tool),
            "models": {k: dict(v) for k, v in self.models.items()}, "workload": self.workload.to_dict(), "task_ids": list(self.task_ids),
            "samples": self.samples, "seed": self.seed, "cache_dir": self.cache_dir,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialSpec:
        d = restore(dict(d))  # the job file was written scrubbed; this process remembered the same variables
        return cls(
            label=d["label"], split=d["split"], genome=Genome.from_dict(d["genome"]),
            pools=Pools.from_dict(d["pools"]), agent=d["agent"], tool=d["tool"], models=d["models"],
            workload=WorkloadSettings.from_dict(d["workload"]),
            task_ids=tuple(d["task_ids"]), samples=int(d["samples"]), seed=int(d["seed"]), cache_dir=d.get("cache_dir"),
        )

    def encode(self) -> str:
        """The spec as one override-safe token (scrubbed JSON, compressed, URL-safe base64): it
        travels inside the job's override, so no job needs a file the orchestrator wrote."""
        text = scrub(json.dumps(self.to_dict(), separators=(",", ":"), default=str))  # key order is prompt order: never sorted
        return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")

    @classmethod
    def decode(cls, token: str) -> TrialSpec:
        try:
            data = json.loads(zlib.decompress(base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True)).decode("utf-8"))
            spec = cls.from_dict(data)
        except (ValueError, zlib.error, UnicodeError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError("trial", f"is not a search job's spec ({type(exc).__name__})",
                              "let `evoharness search` launch its jobs; a trial is not set by hand") from None
        missing = sorted(set(re.findall(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}", json.dumps(spec.to_dict()))))
        if missing:  # a marker this machine cannot fill: the run would send the marker itself as the value
            raise ConfigError("trial", f"the job's config reads environment variable(s) {', '.join(missing)}, "
                              "which are not set where this job runs",
                              "export them on every machine that runs jobs (a launcher does not carry the orchestrator's environment)")
        return spec

    def variant(self) -> HarnessVariant:
        agent, tool, model = genome_to_config(self.genome, self.pools, agent=self.agent, tool=self.tool, models=self.models)
        return compile_agent(agent, tool=tool, model=model)

    def eval_key(self, variant_hash: str) -> str:
        # file options by name: a moved or cloned checkout finds its stored evaluations (their contents are hashed apart)
        return content_hash([variant_hash, self.split, self.samples, self.seed, list(self.task_ids),
                             portable_options(self.workload.options)])


class JobInputError(RuntimeError):
    """A job's ConfigError, carried back to the orchestrator as the job's failure (a ConfigError in a
    task would end the job's process with exit 2, and a launcher would then return nothing of the
    batch): the orchestrator stores the batch's finished results, then stops with its one line."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error

    def __reduce__(self) -> tuple[type[JobInputError], tuple[ConfigError]]:
        return (type(self), (self.error,))


@dataclass(frozen=True)
class TrialResult:
    """A finished evaluation of one variant, with the variant itself (so nothing downstream recompiles)."""

    label: str
    split: Split
    variant: HarnessVariant
    report: EvalReport
    evidence: tuple[FailedEpisode, ...] = ()
    reused: bool = False  # read from the study's store, not paid for again
    # where and when the job ran: host, pid, started and ended (Unix seconds), and the CPU seconds its
    # process spent on it (a worker runs one job at a time): wall against CPU shows a job that waited
    worker: Mapping[str, Any] | None = None
    transcripts: bytes = b""  # the played episodes' transcripts (records/transcripts.py), kept beside the stored record

    @property
    def variant_hash(self) -> str:
        return self.variant.content_hash

    def to_dict(self) -> dict[str, Any]:
        """The stored form (runs/<study>/evals/<key>.json); the variant is rebuilt from the spec."""
        return versioned("trial_result", {"label": self.label, "variant_hash": self.variant_hash, "split": self.split,
                                          "report": self.report.to_dict(), "evidence": [e.to_dict() for e in self.evidence],
                                          "worker": dict(self.worker) if self.worker else None})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], variant: HarnessVariant, *, source: str | Path, reused: bool = False) -> TrialResult:
        d = checked("trial_result", d, source)
        if d.get("variant_hash") != variant.content_hash:
            raise ConfigError(str(source), f"holds the evaluation of variant {str(d.get('variant_hash'))[:12]}, "
                              f"not of {variant.content_hash[:12]} whose key names it",
                              "delete the file; the next run evaluates the variant again")
        return cls(label=str(d["label"]), split=checked_split(d["split"]), variant=variant, report=EvalReport.from_dict(d["report"]),
                   evidence=tuple(FailedEpisode.from_dict(e) for e in d.get("evidence", ())), reused=reused,
                   worker=d.get("worker"))


def stored_result(path: Path, variant: HarnessVariant) -> TrialResult | None:
    """The study's stored evaluation of ``variant`` at ``path``, if any. One that cannot be read is
    bad input (a ConfigError naming the file), never silently paid for again or trusted."""
    if not path.exists():
        return None
    try:
        return TrialResult.from_dict(json.loads(path.read_text(encoding="utf-8")), variant, source=path, reused=True)
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(str(path), f"is not a stored evaluation ({type(exc).__name__}: {exc})",
                          "delete the file; the next run evaluates the variant again") from None


def _tool_errors(trajectories: list[Trajectory], failed: set[tuple[str, int]]) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = {}
    for t in trajectories:
        if (t.task_id, t.sample) in failed:
            out[(t.task_id, t.sample)] = [f"{c.name}: {c.error}" for c in t.tool_calls if c.error][:5]
    return out


_orchestrator_pid: int | None = None


def mark_orchestrator() -> None:
    """This process runs the search: jobs the basic launcher runs here keep its signal handling."""
    global _orchestrator_pid
    _orchestrator_pid = os.getpid()


def job_signals() -> None:
    """A job in a worker process (joblib's, Ray's, Submitit's) makes that process ignore SIGINT from
    then on: a Ctrl-C in the terminal reaches the whole process group, and the orchestrator's answer
    to the first one is to let the batch in flight finish, which a worker killed by the same
    keystroke (running a job, or idle between batches) could not. A second Ctrl-C stops the
    orchestrator, whose launcher then kills its workers. A worker also exits when its parent has gone,
    or the search that started it (a killed orchestrator): a worker forked by the preloaded
    launcher's server has the server for a parent, which lives as long as its workers do."""
    global _watching
    if os.getpid() == _orchestrator_pid or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _watching:  # a worker outlives a killed orchestrator otherwise (joblib's idle for minutes, paying for its job)
        _watching = True
        search = os.environ.get(SEARCH_PID_ENV, "")
        threading.Thread(target=_exit_with_parent, args=(os.getppid(), int(search) if search.isdigit() else None),
                         name="evoharness-parent-watch", daemon=True).start()


_watching = False
SEARCH_PID_ENV = "EVOHARNESS_SEARCH_PID"  # set in the preloaded launcher's server: its workers' search


def _exit_with_parent(parent: int, search: int | None) -> None:
    """Exit this worker process once the process that started it has gone (its parent changes), or
    the search: nothing could take this job's result any more."""
    gone = _exit_watch(search) if search is not None else None
    while os.getppid() == parent and not (gone is not None and gone()):
        time.sleep(0.5)
    os._exit(70)


def _exit_watch(pid: int) -> Callable[[], bool]:
    """Whether ``pid`` has exited: through a pidfd where the system has one (exact: neither a
    reused pid nor a zombie reads as alive), else by signalling it."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (not Linux, an old kernel), or it has gone already
        return functools.partial(_signalled_gone, pid)
    return lambda: bool(select.select([fd], [], [], 0)[0])


def _signalled_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's: a pid reused since, which a pidfd would have told apart
        return False
    return False


def run_trial(spec: TrialSpec) -> TrialResult:
    """Compile the genome and evaluate it. Nothing of the study is read or written here (the
    orchestrator keeps the result); the response cache is the only thing on disk, and it is optional."""
    from evoharness.search.evaluation.evaluate import evaluate_variant_async

    started, cpu = time.time(), time.process_time()
    variant = spec.variant()
    workload = workload_factory(spec.workload.name)(**dict(spec.workload.options))
    tasks = [workload.task(t) for t in spec.task_ids]
    report, trajectories = asyncio.run(
        evaluate_variant_async(
            variant, workload, spec.split, samples=spec.samples, concurrency=spec.workload.concurrency,
            seed=spec.seed, tasks=tasks, cache=open_cache(spec.cache_dir) if spec.cache_dir else None, keep_trajectories=True,
        )
    )
    failed = {(e.task_id, e.sample) for e in report.episodes if e.scored and not e.passed}
    errors = _tool_errors(trajectories, failed)
    blob = transcripts.pack(report.episodes, trajectories)  # compressed here, where the episodes ran
    return TrialResult(
        label=spec.label, split=checked_split(spec.split), variant=variant, report=report,
        evidence=tuple(FailedEpisode(e.task_id, e.sample, e.detail, tuple(errors.get((e.task_id, e.sample), [])),
                                     tuple(Failure.from_dict(f) for f in e.failures))
                       for e in report.episodes if (e.task_id, e.sample) in failed),
        worker={"host": socket.gethostname(), "pid": os.getpid(), "started": round(started, 3), "ended": round(time.time(), 3),
                "cpu_s": round(time.process_time() - cpu, 3)},
        transcripts=blob,
    )
