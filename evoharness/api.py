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
import contextvars
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from evoharness.compiler.variant import HarnessVariant
    from evoharness.search.evaluation.metrics import EvalReport
    from evoharness.search.records.outcome import SearchOutcome

from evoharness.compiler.errors import ConfigError, RunFailed
from evoharness.compiler.hydra_errors import UsageError

Overrides = Sequence[str] | Mapping[str, Any]
T = TypeVar("T")

_ONE_AT_A_TIME = threading.Lock()
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("evoharness_api_call", default=None)


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
    override grammar as literal values: a string stays that text (``a,b`` is not a sweep,
    ``${...}`` is not an interpolation, a backslash stays one backslash)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(overrides, DictConfig):
        plain = {str(k): v for k, v in OmegaConf.to_container(overrides, resolve=False).items()}  # type: ignore[union-attr]
        plain.pop("hydra", None)
        # every key of a composed config is set; an empty mapping has nothing to set (and as an
        # override it would be refused as a no-op); its interpolations stay interpolations
        return [f"++{k}={_value(v, literal=False)}" for k, v in _flatten(plain) if v != {}]
    if isinstance(overrides, Mapping):
        return [f"{_key(k)}={_value(v)}" for k, v in _flatten(dict(overrides))]
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, (Sequence, ListConfig)):
        shown = repr(overrides)[:60]
        raise TypeError(f"overrides must be a list of strings, a mapping or a composed DictConfig, got {type(overrides).__name__} "
                        f"{shown}. Fix: pass a list, e.g. [{overrides!r}]" if isinstance(overrides, str) else
                        f"overrides must be a list of strings, a mapping or a composed DictConfig, got {type(overrides).__name__} "
                        f"{shown}. Fix: pass a list, e.g. ['model=sim_small']")
    out = []
    for o in overrides:
        if not isinstance(o, str):
            raise TypeError(f"override {o!r} is a {type(o).__name__}, not a string. Fix: write it as 'key=value'")
        if o.startswith("-"):
            raise UsageError(f"{o!r}: the Python API runs one command and takes overrides only (no flags; "
                             "config_dir= is --config-dir). Fix: drop it; for a sweep, loop in Python or use the CLI's -m")
        out.append(o)
    return out


_KEY = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*")


def _key(key: object) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise UsageError(f"override key {key!r} is not a dotted config path. Fix: use a key such as 'model.temperature'")
    return key


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=False)
        if isinstance(value, Mapping) and value:
            out.extend(_flatten(value, f"{path}."))
        else:
            out.append((path, value))
    return out


def _value(value: Any, *, literal: bool = True) -> str:
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_value(v, literal=literal)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v, literal=literal) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)  # null, true/false and numbers (NaN and Infinity too) read back as themselves
    if not isinstance(value, str):
        raise TypeError(f"override value {value!r} is a {type(value).__name__}. "
                        "Fix: pass text, a number, a bool, None, a list or a mapping")
    return _quoted(value, literal=literal)


def _quoted(text: str, *, literal: bool) -> str:
    r"""``text`` as a single-quoted Hydra string that reads back as exactly ``text``. Hydra's
    grammar escapes only a backslash run before a quote or at the end, the quote itself, and
    ``\${`` (which, when ``literal``, keeps ``${`` as text rather than an interpolation)."""
    if literal:
        text = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)
    return f"'{text}'"


def _call(command: str, overrides: Overrides, config_dir: str | Path | None, task: Callable[[DictConfig], Any],
          validate: Callable[..., object]) -> object:
    from evoharness.compiler.hydra_run import run_command
    from evoharness.compiler.secrets import remember_credential_env
    from evoharness.search.cli.main import command_argv

    remember_credential_env()  # the values a message must not quote, before anything can fail
    try:
        if config_dir is not None and not str(config_dir).strip():
            raise UsageError("config_dir is empty. Fix: name a folder of configs, or leave config_dir=None for the package's own")
        argv = [*(["--config-dir", str(config_dir)] if config_dir is not None else []), *command_argv(command, as_overrides(overrides))]
    except (ConfigError, UsageError, TypeError) as exc:  # a value quoted back may be a secret's
        raise _scrubbed(exc) from None

    def run() -> object:
        try:
            return run_command(command, argv, task, validate)
        except (ConfigError, UsageError) as exc:
            raise _scrubbed(exc) from None
        except RunFailed as exc:  # the run's report rides along: what was measured is not lost
            from evoharness.compiler.secrets import scrub

            raise RunFailed(scrub(str(exc)), result=exc.result) from None
        except SystemExit as stop:  # a sweep's end: the error that caused it, or its exit code
            if stop.code in (0, None):
                return None
            error = getattr(stop, "error", None)
            if isinstance(error, BaseException):
                raise _scrubbed(error) from None
            raise RuntimeError(f"evoharness {command} stopped (exit code {stop.code}); its output above says why") from None

    return _loop_safe(lambda: _locked(command, run))


def _scrubbed(error: BaseException) -> BaseException:
    """``error`` with every secret value in its message replaced by the variable that holds it,
    as the command line prints it (a notebook keeps a traceback in its file)."""
    from evoharness.compiler.secrets import scrub

    if isinstance(error, ConfigError):
        return ConfigError(scrub(error.path), scrub(error.problem), scrub(error.fix))
    if isinstance(error, KeyboardInterrupt):
        return error
    try:
        return type(error)(scrub(str(error)))
    except Exception:  # an error type that takes other arguments: its message, scrubbed, as a RuntimeError
        return RuntimeError(scrub(str(error)))


def _locked(command: str, work: Callable[[], T]) -> T:
    from evoharness.search.cli.commands import sharing_workloads

    if _OWNER.get() is not None:  # Hydra's state is the running call's: a nested one would wait on itself
        raise RuntimeError(f"evoharness.{command} was called while evoharness.{_OWNER.get()} was running in the same thread "
                           "(from a callback or a tool?). Fix: make the call after the first one returns")
    with _ONE_AT_A_TIME, sharing_workloads():
        token = _OWNER.set(command)
        try:
            return work()
        finally:
            _OWNER.reset(token)


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
            return _waited(future)
        except KeyboardInterrupt:
            from evoharness.search.optimise.sweeper import request_stop

            if not request_stop():
                raise
            return _waited(future)


def _waited(future: concurrent.futures.Future[T]) -> T:
    """``future.result()``, waking every tenth of a second. A process-wide SIGINT may be handed by
    the OS to any thread; Python runs its handler on the main thread only when that thread runs
    bytecode, so a main thread blocked in one untimed wait would hear the stop button only once
    the search had ended."""
    while True:
        try:
            return future.result(timeout=0.1)
        except concurrent.futures.TimeoutError:
            continue
