"""The NSGA-II sweeper: each batch of trials goes to the configured Hydra launcher (basic,
joblib, …) as jobs of the search command; results come back as JobReturns."""
from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from evoharness.compiler.secrets import scrub
from evoharness.search.optimise.trial import TrialResult, TrialSpec


class StopRequest:
    """SIGINT/SIGTERM during a search: the first one lets the batch in flight finish (its results are
    told, nothing paid is lost) and stops before the next; a second one stops at once. The handler only
    sets a flag: an exception raised at an arbitrary point inside Hydra's job code could be masked.
    Off the main thread (a search run from a worker thread) nothing is installed: only the main
    thread may set signal handlers, and its own handlers stay as they are."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("stopping after the batch in flight (press Ctrl-C again to stop at once)", file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        _ACTIVE.append(self)
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        while self._previous:
            sig, handler = self._previous.popitem()
            signal.signal(sig, handler)


_ACTIVE: list[StopRequest] = []  # the searches running in this process (one per thread that runs one)


def request_stop() -> bool:
    """Ask every search running in this process to stop after its batch in flight, as a first
    Ctrl-C would (for a search on a worker thread, whose caller's thread receives the interrupt).
    Whether one was running when asked: it may have heard and ended before this returns."""
    running = list(_ACTIVE)
    for stop in running:
        if not stop.requested:
            stop.requested = True
            print("stopping after the batch in flight", file=sys.stderr, flush=True)
    return bool(running)


def _exit(code: int, error: BaseException) -> SystemExit:
    """The command line's exit code, carrying the error that caused it: a Python caller (the API)
    raises that error itself rather than an exit code."""
    stop = SystemExit(code)
    stop.error = error  # type: ignore[attr-defined]
    return stop


class NSGA2SweeperImpl:
    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.job_idx = 0
        self.arguments: list[str] = []
        self.stop: StopRequest | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        # Hydra sets its run-time config for each job, not for the sweeper: set here, the orchestrator's
        # lookups by name (search.models, search.teacher, templates) see the folders this command
        # composed with, the plugins' config dirs (hydra.searchpath) included, and the workload it chose
        HydraConfig.instance().set_config(config)
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context, task_function=task_function, config=config)
        init = getattr(getattr(self.launcher, "ray_cfg", None), "init", None)
        if init is not None and init.get("address") and "object_store_memory" not in init:
            # hydra-ray-launcher sets a default object store size that ray.init refuses when it joins a
            # running cluster (the cluster's own size applies): joining one must work as written
            with open_dict(init):
                init.object_store_memory = None
        if not config.hydra.get("verbose"):
            # a launcher logs every job's "+trial=..." override: dozens of lines that bury the
            # search's own round lines; `hydra.verbose=true` brings them back
            for cls in type(self.launcher).__mro__:  # a launcher built on another logs from the other's package
                if cls.__module__.startswith("hydra_plugins."):
                    logging.getLogger(cls.__module__.rpartition(".")[0]).setLevel(logging.WARNING)

    def launch(self, specs: Sequence[TrialSpec]) -> list[TrialResult | BaseException]:
        assert self.launcher is not None
        # The spec rides in the job's override and the result in its return value: a job needs no
        # file of the orchestrator's, and writes none (no .hydra/ copy, no log file, and its output
        # dir is the folder it runs in, which exists wherever that is: nothing is created there).
        job_side = ["hydra.output_subdir=null", "hydra/job_logging=stdout", "hydra.sweep.dir=.", "hydra.sweep.subdir=."]
        overrides = [[*self.arguments, *job_side, f"+trial='{spec.encode()}'"] for spec in specs]
        try:
            returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        except Exception as exc:  # the engine, not a job: nothing was told, and a resume re-runs the batch
            from evoharness.search.optimise.run import SearchAborted, SearchInterrupted

            what = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
            if self.stop is not None and self.stop.requested:
                # a worker the same Ctrl-C reached before its first job (while it started) broke the pool;
                # the user asked to stop, but says what broke, so a real failure is not hidden as the stop
                print(f"the batch in flight was lost after the stop request ({what}); its trials run again on resume",
                      file=sys.stderr)
                raise SearchInterrupted("stopped by request") from None
            name = type(self.launcher).__name__
            raise SearchAborted(f"the launcher ({name}) could not run a batch of {len(specs)} jobs ({what}); "
                                "every finished trial is kept: fix the launcher's settings (hydra.launcher.*) and run the "
                                "same command again") from None
        self.job_idx += len(returns)
        out: list[TrialResult | BaseException] = []
        for r in returns:
            if r.status == JobStatus.COMPLETED:
                value = r.return_value
                out.append(value if isinstance(value, TrialResult)
                           else TypeError(f"a search job returned {type(value).__name__}, not a TrialResult"))
            else:
                err = r._return_value  # Hydra keeps the job's exception here
                out.append(err if isinstance(err, BaseException) else RuntimeError(str(err)))
        return out

    def sweep(self, arguments: list[str]) -> Any:
        from evoharness.compiler.errors import ConfigError
        from evoharness.search.optimise.finish import FinishAborted
        from evoharness.search.optimise.lock import storage_lock, study_lock
        from evoharness.search.optimise.run import SearchAborted, SearchInterrupted, SearchRun
        from evoharness.search.optimise.settings import StudyPaths, search_settings
        from evoharness.search.optimise.trial import mark_orchestrator
        from evoharness.search.records.summary import print_summary

        assert self.config is not None
        mark_orchestrator()
        self.arguments = list(arguments)
        try:
            settings = search_settings(self.config, self.arguments)  # as the preflight built and checked them
            paths = StudyPaths.of(settings)
            with StopRequest() as stop, study_lock(paths.dir, settings.search.study), storage_lock(paths.storage, settings.search.study):
                self.stop = stop
                summary = SearchRun(settings, launch=self.launch, should_stop=lambda: stop.requested).execute()
        except (SearchAborted, FinishAborted, ConfigError) as exc:
            # bad input or a run that cannot go on: one line and exit 2; the study keeps every finished trial
            print(f"error: {scrub(str(exc))}", file=sys.stderr)
            raise _exit(2, exc) from None
        except (KeyboardInterrupt, SearchInterrupted) as stopped:
            # the batch in flight is abandoned: its trials stay RUNNING under no live owner (the study's
            # lock went with this process), and the next run closes them, marks them and runs them again
            print("interrupted; resume with the same command", file=sys.stderr)
            raise _exit(130, stopped) from None
        print_summary(summary)
        return summary
