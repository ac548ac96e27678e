"""The Python API: the CLI's compile, evaluate and search, called from a script or a notebook, with
typed results.

Each call composes the config the CLI would compose for the same overrides (the primary config,
its plugins, the promoted snapshot, ``config_dir`` first on the search path), runs the same
pre-run checks (a bad value raises :class:`~evoharness.compiler.errors.ConfigError` naming it,
before anything is paid for), runs the same task and writes the same records. The CLI is a thin
caller of the same functions, so a script and a shell session cannot drift apart.

A notebook's cell runs inside an event loop, and the evaluation loop owns one of its own: a call
made while a loop is running runs on a worker thread and blocks until it is done; in ``async``
code, ``await evaluate_async(...)`` keeps the caller's loop free. Hydra's state is process-wide,
so calls run one at a time (a second one waits for the first)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from evoharness.compiler.variant import HarnessVariant
    from evoharness.search.evaluation.metrics import EvalReport
    from evoharness.search.records.outcome import SearchOutcome

Overrides = Sequence[str] | Mapping[str, Any]
T = TypeVar("T")

_ONE_AT_A_TIME = threading.Lock()


def compile(overrides: Overrides = (), *, config_dir: str | Path | None = None) -> HarnessVariant:  # noqa: A001
    """Compile the config (``evoharness compile``): the content-hashed variant, also written to
    ``<runs_dir>/compiled/<hash>/``.

    ``overrides``: Hydra overrides as on the command line (``["model=sim_small"]``), or a mapping
    of dotted keys to values (``{"model.temperature": 0.7}``), or a composed ``DictConfig``.
    ``config_dir``: a folder searched before the package's own configs (``--config-dir``).
    Raises ``ConfigError`` (a bad value: one line naming it and the fix) or ``UsageError`` (an
    override that does not parse, an unknown flag) before anything is written."""
    from evoharness.compiler.cli import compile_task, compile_validate

    return _call("compile", overrides, config_dir, compile_task, compile_validate)  # type: ignore[return-value]


def evaluate(overrides: Overrides = (), *, config_dir: str | Path | None = None) -> EvalReport:
    """Evaluate the config's variant on ``workload.split`` (``evoharness evaluate``): the report,
    also written as ``eval.json`` in the run's output folder. Parameters as :func:`compile`.
    Raises ``ConfigError`` before any model call (a bad value, a missing key, the sealed holdout)."""
    from evoharness.search.cli.commands import evaluate_task, evaluate_validate

    return _call("evaluate", overrides, config_dir, evaluate_task, evaluate_validate)  # type: ignore[return-value]


async def evaluate_async(overrides: Overrides = (), *, config_dir: str | Path | None = None) -> EvalReport:
    """:func:`evaluate` for ``async`` code (a notebook cell: ``report = await evaluate_async(...)``):
    it runs on a worker thread, so the caller's event loop keeps running."""
    return await asyncio.to_thread(evaluate, overrides, config_dir=config_dir)


def search(overrides: Overrides = (), *, config_dir: str | Path | None = None) -> SearchOutcome:
    """Run a search (``evoharness search``): its outcome, read back from the ``summary.json`` it
    wrote in ``<runs_dir>/<search.study>/``. Parameters as :func:`compile`; ``model=a,b`` style
    sweeps name the search's choices, as on the command line. Raises ``ConfigError`` before the
    first paid call, and ``RuntimeError`` when the search stopped without an outcome."""
    from evoharness.search.cli.commands import search_task, search_validate
    from evoharness.search.records.outcome import SearchOutcome

    where: list[Path] = []

    def validate(cfg: DictConfig, combo: Sequence[str] = ()) -> object:
        where.append(Path(str(cfg.runs_dir)) / str(cfg.search.study) / "summary.json")
        return search_validate(cfg, combo)

    _call("search", overrides, config_dir, search_task, validate)
    if not where or not where[-1].is_file():
        raise RuntimeError(f"the search left no outcome ({where[-1] if where else 'no study'}): it stopped before its finish; "
                           "its output above says why, and running the same call again resumes it")
    return SearchOutcome.from_dict(json.loads(where[-1].read_text()))


def as_overrides(overrides: Overrides) -> list[str]:
    """Command-line overrides from a list of them, a mapping of dotted keys to values, or a
    composed config (its ``hydra`` node left out). A mapping's values are written in Hydra's
    override grammar (strings quoted), so no value is parsed as a sweep or a group choice."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(overrides, DictConfig):
        plain = {str(k): v for k, v in OmegaConf.to_container(overrides, resolve=False).items()}  # type: ignore[union-attr]
        plain.pop("hydra", None)
        # every key of a composed config is set; an empty mapping has nothing to set (and as an
        # override it would be refused as a no-op)
        return [f"++{k}={_value(v)}" for k, v in _flatten(plain) if v != {}]
    if isinstance(overrides, Mapping):
        return [f"{k}={_value(v)}" for k, v in _flatten(dict(overrides))]
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a list of strings, got the string {overrides!r}. Fix: pass [{overrides!r}]")
    return [str(o) for o in overrides]


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(_flatten(value, f"{path}."))
        else:
            out.append((path, value))
    return out


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)  # null, true/false and numbers read back as themselves
    text = str(value)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _call(command: str, overrides: Overrides, config_dir: str | Path | None, task: Callable[[DictConfig], Any],
          validate: Callable[..., object]) -> object:
    from evoharness.compiler.hydra_run import run_command
    from evoharness.search.cli.main import command_argv

    argv = [*(["--config-dir", str(config_dir)] if config_dir is not None else []), *command_argv(command, as_overrides(overrides))]

    def run() -> object:
        try:
            return run_command(command, argv, task, validate)
        except SystemExit as stop:  # a sweep's failure is reported the way hydra.main reports it, then exits
            if stop.code in (0, None):
                return None
            raise RuntimeError(f"evoharness {command} stopped (exit code {stop.code}); its output above says why") from None

    return _loop_safe(lambda: _locked(run))


def _locked(work: Callable[[], T]) -> T:
    from evoharness.search.cli.commands import sharing_workloads

    with _ONE_AT_A_TIME, sharing_workloads():
        return work()


def _loop_safe(work: Callable[[], T]) -> T:
    """``work()``, on a worker thread when this thread runs an event loop (the evaluation loop's
    own ``asyncio.run`` cannot start inside a running one). An interrupt while it runs there (a
    notebook's stop button) asks a search to stop after its batch in flight, as Ctrl-C does on the
    command line: what it paid for is kept, and the call then returns or raises as that search does."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoharness") as pool:
        future = pool.submit(work)
        try:
            return future.result()
        except KeyboardInterrupt:
            from evoharness.search.optimise.sweeper import request_stop

            if not request_stop():
                raise
            return future.result()
