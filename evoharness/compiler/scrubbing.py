"""Secret values scrubbed from what a Hydra run writes: its saved configs, its logs, and a
sweep's record of its overrides."""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evoharness.compiler.atomic import print_whole, write_text_atomic
from evoharness.compiler.errors import ConfigError, RouteRefused, RunFailed
from evoharness.compiler.secrets import install_log_scrubber, remember_config, scrub, watch_env_resolver


def scrub_files(directory: str | Path) -> None:
    """Scrub, in place and atomically, every text file under ``directory`` (Hydra's saved configs)."""
    root = Path(directory)
    if not root.is_dir():
        return
    for path in root.rglob("*"):
        _scrub_file(path)


def _scrub_file(path: Path) -> None:
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if scrub(text) != text:
        write_text_atomic(path, text)


class TaskFailed(BaseException):
    """A RunFailed a task raised, carried past Hydra's own reporting of task exceptions (a traceback)."""

    def __init__(self, error: RunFailed) -> None:
        super().__init__(str(error))
        self.error = error


class TaskRefused(BaseException):
    """A ConfigError a task found once its run had started, carried past Hydra's own reporting of
    task exceptions (which would turn it into a traceback and exit code 1)."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


def scrubbed_task(task: Callable[[DictConfig], object], *, raising: bool = False) -> Callable[[DictConfig], object]:
    """The task, in any process a launcher runs it in, with this config's secret values scrubbed
    from logs, from Hydra's saved configs (written before the task starts) and from every file.
    A ConfigError the task raises is one line and exit code 2 or, with ``raising`` (a run in this
    process), a TaskRefused for the caller to raise again; a route's refusal or a failed run
    (RunFailed) in a multirun's job is that job's failure, so the sweep keeps its other jobs."""
    import functools

    @functools.wraps(task)
    def run(cfg: DictConfig) -> object:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from evoharness.compiler.plugins import load_plugins

        watch_env_resolver()
        remember_config(cfg)
        install_log_scrubber()
        load_plugins([str(m) for m in (cfg.get("plugins") or [])])  # a launcher's job process registers them too
        runtime = HydraConfig.get()
        if runtime.output_subdir is not None:
            scrub_files(Path(runtime.runtime.output_dir) / str(runtime.output_subdir))
        if runtime.mode == RunMode.MULTIRUN and runtime.output_subdir is not None:  # the sweep's own record of its overrides
            _scrub_file(Path(str(runtime.sweep.dir)) / "multirun.yaml")
        try:
            return task(cfg)
        except ConfigError as exc:  # found only once the run had started (a snapshot miss)
            if raising:
                raise TaskRefused(exc) from None
            if isinstance(exc, RouteRefused):  # one job's failure: the launcher records it, the sweep keeps the rest
                raise RuntimeError(scrub(str(exc))) from None
            print_whole(f"error: {scrub(str(exc))}", sys.stderr)
            raise SystemExit(2) from None
        except RunFailed as exc:
            if raising:
                raise TaskFailed(exc) from None
            raise RuntimeError(scrub(str(exc))) from None  # one job's failure, as above

    return run


_SWEEP_DIRS: list[Path] = []  # the sweep dir of each multirun this process started


class NoteSweepDir(Callback):
    """Notes the sweep dir when a multirun starts, so that the sweep's multirun.yaml is scrubbed
    where the sweep ran once it returns or fails: a job scrubs it too, but a job on another machine
    (Ray, SLURM) writes nothing on this one."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _SWEEP_DIRS.append(Path(str(config.hydra.sweep.dir)))


def scrub_sweep_records() -> None:
    while _SWEEP_DIRS:
        _scrub_file(_SWEEP_DIRS.pop() / "multirun.yaml")
