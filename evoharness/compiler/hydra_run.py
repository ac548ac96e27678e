"""Run an evoharness command as a Hydra app over conf/, after the preflight."""
from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Sequence

from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from evoharness.compiler.errors import ConfigError, RunFailed
from evoharness.compiler.hydra_argv import resolve_config_path
from evoharness.compiler.hydra_errors import UsageError
from evoharness.compiler.preflight import VERSION_BASE, Validator, preflight
from evoharness.compiler.scrubbing import NoteSweepDir, TaskFailed, TaskRefused, scrub_sweep_records, scrubbed_task
from evoharness.compiler.secrets import install_log_scrubber, remember_credential_env, scrub, watch_env_resolver
from evoharness.conf import CONF_DIR

_FLAGS = ("-m", "--multirun", "-h", "--help")  # besides --config-dir DIR
# Hydra's own ways to look at a config instead of running it, with the values each flag takes
# (None: any value; a flag missing here takes none)
_SHOW: dict[str, tuple[str, ...] | None] = {
    "--cfg": ("job", "hydra", "all"), "-c": ("job", "hydra", "all"), "--package": None, "-p": None,
    "--info": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"),
    "-i": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"), "--resolve": ()}


def _show_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Hydra's config-showing flags and their values taken out of argv: (those, the rest)."""
    show: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a not in _SHOW:
            rest.append(a)
            i += 1
            continue
        values, nxt = _SHOW[a], argv[i + 1] if i + 1 < len(argv) else None
        if a in ("--cfg", "-c", "--package", "-p"):
            if nxt is None or nxt.startswith("-") or (values is not None and nxt not in values):
                raise UsageError(f"{a} needs a value{f' among {list(values)}' if values else ''}, got {nxt!r}. "
                                 f"Fix: e.g. {a} {values[0] if values else 'agent'}")
            show += [a, nxt]
            i += 2
        elif a in ("--info", "-i"):  # its value is optional, and argparse would take the next override for it
            given = nxt is not None and values is not None and nxt in values
            show += [a, nxt if given and nxt is not None else "all"]
            i += 2 if given else 1
        else:
            show.append(a)
            i += 1
    return show, rest


Task = Callable[[DictConfig], object]


def run_command(command: str, argv: Sequence[str], task: Task, validate: Validator | None, *, report_failures: bool = False) -> object:
    """Preflight, then hand argv to Hydra (which owns multirun, launchers and output dirs). Bad input
    raises a one-line ConfigError or UsageError before anything is written; so does a ConfigError the
    task finds once a single run has started. Returns what the task returned on a single run, None on
    a multirun (its jobs' values stay with the sweeper). A single run's other failures propagate as
    they are, or with ``report_failures`` are reported the way ``hydra.main`` reports them."""
    from hydra.core.hydra_config import HydraConfig

    # The command's lookups read its own search path, never the HydraConfig of an enclosing Hydra app
    # or of a command that ran before in this process; the enclosing app gets its own back after.
    outer = HydraConfig.instance().cfg
    HydraConfig.instance().cfg = None  # type: ignore[assignment]
    try:
        return _run_command(command, argv, task, validate, report_failures=report_failures)
    finally:
        HydraConfig.instance().cfg = outer


def _run_command(command: str, argv: Sequence[str], task: Task, validate: Validator | None, *, report_failures: bool) -> object:
    import hydra
    from hydra import version
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs

    version.setbase(VERSION_BASE)  # what hydra.main sets: the pre-run checks and a composed run follow the same rules
    register_configs()
    remember_credential_env()  # before anything can fail and print a value
    watch_env_resolver()
    show, argv = _show_flags(argv)  # first: their values are not overrides
    if show and command != "search" and any(a in ("-m", "--multirun") for a in argv):  # a search is always a sweep
        raise UsageError(f"{show[0]} shows one config, and -m asks for a sweep. Fix: drop -m and give one value per key")
    cp, argv = resolve_config_path(argv)
    unknown = [a for a in argv if a.startswith("-") and a not in _FLAGS]
    if unknown:
        raise UsageError(f"unknown flag {unknown[0]!r}: evoharness {command} takes Hydra overrides (key=value), -m, "
                         f"--config-dir DIR and Hydra's --cfg, --package, --resolve and --info. Fix: drop it, or write it as an override")
    plain = [*[a for a in argv if not a.startswith("-")], f"hydra.job.name={command}"]
    if any(a in ("-m", "--multirun") for a in argv):
        plain.append(f"++hydra.callbacks.note_sweep_dir._target_={NoteSweepDir.__module__}.{NoteSweepDir.__qualname__}")
    # one run (no sweep, no help) is composed once: the composition validated here is the one that runs
    single = not any(a in _FLAGS for a in argv) and not show
    composed = preflight([*plain, *[a for a in argv if a.startswith("-")]], validate, cp, for_run=single)
    install_log_scrubber()  # before Hydra logs its first line (a launcher logs every job's overrides)
    saved = sys.argv
    # argparse cannot interleave flags and positional overrides: flags go first.
    # Hydra shows a config instead of running, a sweep's (a search's) included: one mode at a time
    flags = [a for a in argv if a.startswith("-") and not (show and a in ("-m", "--multirun"))] + show
    searchpath = cp.searchpath_override()
    sys.argv = [f"evoharness {command}", *flags, *(["--config-dir", cp.first] if cp.first else []),
                *(["--config-name", cp.primary] if cp.primary != "config" else []), *plain, *([searchpath] if searchpath else [])]
    try:
        if composed is not None and composed.hydra.mode in (None, RunMode.RUN):
            try:
                return run_composed(composed, cp.primary, scrubbed_task(task, raising=True), report_failures=report_failures)
            except TaskRefused as refused:
                raise refused.error from None
            except TaskFailed as failed:
                raise failed.error from None
        GlobalHydra.instance().clear()  # hydra.main composes on its own Hydra
        app = hydra.main(config_path=CONF_DIR, config_name="config", version_base=VERSION_BASE)(scrubbed_task(task))
        try:
            if show:  # Hydra prints the config: a value it resolved from the environment is shown as its marker
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    app()
                sys.stdout.write(scrub(out.getvalue()))
            else:
                app()
        finally:
            scrub_sweep_records()
        return None
    finally:
        sys.argv = saved
        GlobalHydra.instance().clear()


def run_hydra(command: str, argv: Sequence[str], task: Task, validate: Validator | None) -> int:
    """The command line's ``run_command``: bad input is one scrubbed ``error:`` line and exit code 2."""
    try:
        run_command(command, argv, task, validate, report_failures=True)
    except (ConfigError, UsageError) as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except RunFailed as exc:  # its record is written; the run says why it does not stand
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 1
    return 0


def run_composed(cfg: DictConfig, config_name: str, task: Task, *, report_failures: bool = True) -> object:
    """Hydra's run of ``task`` on a config Hydra composed for it (what ``hydra.main`` does once it has
    composed the same config twice more: callbacks, the run dir, logging, ``HydraConfig``): the task's
    return value. With ``report_failures`` a task's exception is reported the way ``hydra.main``
    reports it (exit code 1); otherwise it propagates."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.utils import run_and_report
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    def run() -> object:
        assert GlobalHydra.instance().is_initialized(), "run_composed needs the Hydra that composed cfg"
        with open_dict(cfg):
            cfg.hydra.mode = RunMode.RUN
        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=config_name)
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=callbacks)
        ret = run_job(hydra_context=context, task_function=task, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None)
        callbacks.on_run_end(config=cfg, config_name=config_name, job_return=ret)
        return ret.return_value  # a failed job raises here

    return run_and_report(run) if report_failures else run()
