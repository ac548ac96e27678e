"""Run an evoharness command as a Hydra app over conf/, after a preflight that rejects bad input.

Hydra reports composition errors as multi-line text with exit code 1 and only after it has
created the run directory. The preflight composes every combination of the overrides first
(expanding sweeps the way the basic sweeper does) and runs the command's own validation, so bad
input gets one line, exit code 2, and nothing is written.
"""
from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import unwritable, write_text_atomic
from evoharness.compiler.configpath import ConfigPath, as_url
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.schema import unknown_keys
from evoharness.compiler.secrets import install_log_scrubber, remember_config, remember_credential_env, scrub, watch_env_resolver
from evoharness.conf import CONF_DIR
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

MAX_PREFLIGHT_COMBINATIONS = 64
VERSION_BASE = "1.3"  # Hydra's defaults for this version: no chdir into the run dir, _self_ last


WORKERS_PER_CORE = 2  # an evaluation waits on its model part of the time: two per core keep the cores busy


def usable_workers(at_most: object) -> int:
    """``${evoharness.workers:N}``: two workers per core this process may use, but no more than N (a
    launcher's workers beyond the largest batch would only hold memory, about 400 MB each). The
    worker counts tried on the main job are in bench/README.md."""
    import os

    try:
        cap = int(str(at_most))
    except ValueError:
        raise ConfigError("hydra.launcher.n_jobs", f"${{evoharness.workers:{at_most}}} needs a whole number",
                          "write ${evoharness.workers:6}, or a plain number of workers") from None
    return max(1, min(WORKERS_PER_CORE * len(os.sched_getaffinity(0)), cap))  # a batch size below 1 is the search's own error to report


OmegaConf.register_new_resolver("evoharness.workers", usable_workers, replace=True)

Validator = Callable[[DictConfig, Sequence[str]], object]  # (composed config, its overrides)


class UsageError(Exception):
    """Bad command-line input that is not a config path (exit 2)."""


def _split_overrides(argv: Sequence[str]) -> tuple[list[str], bool]:
    multirun = any(a in ("-m", "--multirun") for a in argv)
    return [a for a in argv if not a.startswith("-")], multirun


_VALUE_FLAGS = {"--config-dir": "--config-dir", "-cd": "--config-dir", "--config-name": "--config-name", "-cn": "--config-name"}


def _value_flags(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Flags that take a value (``--config-dir DIR``, ``-cd DIR``, ``--config-dir=DIR``; the same
    for ``--config-name``/``-cn``) taken out of argv: ({long flag: value}, the rest)."""
    found: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        a = args[i]
        flag, _, inline = a.partition("=")
        if flag not in _VALUE_FLAGS:
            rest.append(a)
            i += 1
            continue
        if inline:
            value, i = inline, i + 1
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            value, i = args[i + 1], i + 2
        else:
            raise UsageError(f"{flag} needs a value. Fix: write {flag} VALUE")
        long = _VALUE_FLAGS[flag]
        if long in found:
            raise UsageError(f"{long} given twice ({found[long]!r} and {value!r}). Fix: give it once"
                             + ("; add more folders with hydra.searchpath=[DIR,...]" if long == "--config-dir" else ""))
        found[long] = value
    return found, rest


def config_dir_flag(argv: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """(the ``--config-dir`` folder, absolute, or None; the ``--config-name``; the rest of argv)."""
    from evoharness.compiler.names import checked_name

    flags, rest = _value_flags(argv)
    folder: str | None = None
    if "--config-dir" in flags:
        path = Path(flags["--config-dir"]).expanduser().absolute()
        if not path.is_dir():
            raise UsageError(f"--config-dir {flags['--config-dir']}: no such folder. Fix: point it at a folder of YAML config "
                             "groups (e.g. one holding workload/ and agent/)")
        folder = str(path)
    name = flags.get("--config-name", "config")
    try:
        checked_name("--config-name", name.removesuffix(".yaml"), example="myapp")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return folder, name.removesuffix(".yaml"), rest


def _user_searchpath(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``hydra.searchpath=[...]`` taken out of the overrides: (its entries as URLs, the other overrides)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    entries: list[str] = []
    rest: list[str] = []
    for ov in overrides:
        if ov.lstrip("+").split("=", 1)[0] != "hydra.searchpath":
            rest.append(ov)
            continue
        try:
            [parsed] = OverridesParser.create().parse_overrides([ov])
            value = parsed.value()
        except OverrideParseException as exc:
            raise UsageError(_parse_error([ov], str(exc).strip().splitlines()[0])) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"hydra.searchpath: must be a list of folders, got {value!r}. Fix: hydra.searchpath=[DIR,...]")
        for v in value:
            url = as_url(v)
            if url.startswith("file://") and not Path(url[len("file://"):]).is_dir():
                raise UsageError(f"hydra.searchpath: no such folder {v!r}. Fix: list folders of YAML config groups that exist")
            entries.append(url)
    return entries, rest


def resolve_config_path(argv: Sequence[str]) -> tuple[ConfigPath, list[str]]:
    """The search path this command composes with, and argv without the flags and overrides that
    made it: ``--config-dir`` first, then ``hydra.searchpath``, the installed plugins' config dirs
    and those of the ``plugins`` config key. Plugins are imported here, before composition."""
    from evoharness.compiler.plugins import load_plugins

    first, primary, rest = config_dir_flag(argv)
    overrides, _ = _split_overrides(rest)
    user, plain = _user_searchpath(overrides)
    flags = [a for a in rest if a.startswith("-")]
    installed = [f"file://{d}" for d in load_plugins(entry_points=True)]
    cp = ConfigPath(first=first, extra=tuple(dict.fromkeys([*user, *installed])), primary=primary)
    named = _plugins_named(plain, cp)
    if named:
        more = [f"file://{d}" for d in load_plugins(named, entry_points=False)]
        cp = ConfigPath(first=first, extra=tuple(dict.fromkeys([*cp.extra, *more])), primary=primary)
    return cp, [*flags, *plain]


def _plugins_named(overrides: Sequence[str], cp: ConfigPath) -> list[str]:
    """The ``plugins`` key, read before composing: a ``plugins=[...]`` override, else the primary
    config file's own key (composing first could not work: its defaults may name what the
    plugins bring)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    given = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] == "plugins"]
    if len(given) > 1:
        raise UsageError("plugins: given twice. Fix: give one list, plugins=[a,b]")
    if given:
        try:
            [parsed] = OverridesParser.create().parse_overrides(given)
        except OverrideParseException as exc:
            raise UsageError(_parse_error(given, str(exc).strip().splitlines()[0])) from None
        if parsed.is_sweep_override():
            raise UsageError("plugins: cannot be swept (every job loads the same plugins). Fix: give one list, plugins=[a,b]")
        value = parsed.value()
        if parsed.is_delete():
            return []
    else:
        import yaml

        primary = next((d / f"{cp.primary}.yaml" for d in cp.dirs() if (d / f"{cp.primary}.yaml").is_file()), None)
        try:
            raw = yaml.safe_load(primary.read_text(encoding="utf-8")) if primary is not None else None
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return []  # the composition reports a broken primary config with its own line
        value = raw.get("plugins") if isinstance(raw, dict) else None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"plugins: must be a list of module names, got {value!r}. Fix: plugins=[my_pkg.plugin]")
    return list(value)


def _combinations(overrides: list[str], multirun: bool) -> list[list[str]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise UsageError(_parse_error(overrides, first)) from None
    axes: list[list[str]] = []
    for ov in parsed:
        key = ov.get_key_element()
        if key.startswith("hydra") or key.startswith("+hydra"):
            continue
        if ov.is_sweep_override():
            if not multirun:
                raise UsageError(f"{ov.input_line}: a sweep needs multirun. Fix: add -m")
            try:
                values = list(ov.sweep_string_iterator())
            except Exception:  # interval()/range sweeps the search samples itself: check one value
                values = []
            axes.append([f"{key}={v}" for v in values])
        else:
            axes.append([str(ov.input_line)])
    combos = [list(c) for c in itertools.product(*[a for a in axes if a])]
    return combos[:MAX_PREFLIGHT_COMBINATIONS] or [[]]


_NEEDS_QUOTES = re.compile(r"[{}\[\]()'\"\\:,$=\s]|[^\x00-\x7f]")


def _parse_error(overrides: Sequence[str], first: str) -> str:
    """Name the override Hydra could not parse; a value with braces, quotes or non-ASCII text needs quoting."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for ov in overrides:
        try:
            OverridesParser.create().parse_overrides([ov])
        except Exception:
            key, _, value = ov.partition("=")
            if value and _NEEDS_QUOTES.search(value):
                return (f"{key}: cannot parse the value {value!r} ({first}). "
                        f"Fix: quote it for Hydra, e.g. \"{key}='{value}'\" (escape a ' inside as \\')")
            return f"bad override {ov!r}: {first}. Fix: write key=value (sweeps: key=a,b,c with -m)"
    return f"bad override: {first}. Fix: write key=value (sweeps: key=a,b,c with -m)"


def _one_line_hydra_error(exc: BaseException, overrides: list[str], cp: ConfigPath | None = None) -> str:
    from hydra.errors import MissingConfigException

    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = str(exc.missing_cfg_file).rpartition("/")
        options = [o for o in (exc.options or []) if not o.endswith("_schema")]
        searched = ", ".join(str(d) for d in (cp or ConfigPath()).dirs())
        if not group:  # the primary config itself
            return (f"--config-name {option}: no primary config {option}.yaml in the config dirs searched ({searched}). "
                    "Fix: put it in your config dir and pass --config-dir DIR, or drop --config-name")
        return (f"{group}={option}: no such option in config group '{group}' (config dirs searched: {searched}). "
                f"Fix: use one of {options}, or add {group}/{option}.yaml to your own config dir and pass --config-dir DIR")
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, UnicodeDecodeError):  # Hydra does not say which file: find it
        bad = _undecodable_yaml(cp or ConfigPath())
        where = f"{bad}: " if bad else ""
        return (f"{where}not UTF-8 text (byte {cause.start}: {cause.reason}). "
                f"Fix: save {bad or 'the config file'} as UTF-8")
    if isinstance(cause, RecursionError):
        return ("the defaults lists include each other in a loop (a config's defaults name itself, directly or through "
                f"another file; config dirs: {', '.join(str(d) for d in (cp or ConfigPath()).dirs())}). "
                "Fix: remove the entry that leads back to the file it is in")
    mark = getattr(cause, "problem_mark", None)
    if mark is not None:  # a YAML syntax error: name the file and line
        problem = str(getattr(cause, "problem", None) or str(cause).splitlines()[0])
        return (f"{mark.name}: line {mark.line + 1}, column {mark.column + 1}: {problem} (not valid YAML). "
                f"Fix: correct the YAML in {mark.name}")
    lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
    full_key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), "")
    head = lines[0] if lines else type(cause).__name__
    where = f"{full_key}: " if full_key else ""
    if "is not in struct" in head and full_key:
        return (f"{where}{head}. Fix: check the spelling; to add a new key where the schema allows free keys "
                f"(e.g. agent.vars), write +{full_key}=...")
    return f"{where}{head}. Fix: correct the override or YAML value to match the schema in compiler/schema.py"


def _refuse_non_finite(cfg: DictConfig) -> None:
    """No setting is NaN or infinite, whichever file or override it comes from: NaN passes every "< 0"
    check, and a record holding one cannot be written as JSON once the run has been paid for. A value
    that cannot be resolved here (a variable only the machine that reads it has) is left to whoever reads it."""
    import math

    def walk(node: Any, path: str) -> None:
        keys: list[Any] = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else (
            list(range(len(node))) if isinstance(node, ListConfig) else [])
        for key in keys:
            if not path and key == "hydra":  # Hydra's own node resolves only inside a run
                continue
            where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
            try:
                value = node[key]
            except Exception:  # an interpolation this command never resolves: not this check's to report
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(where, f"{value} is not a finite number", "give a finite number (or null where the setting allows it)")
            walk(value, where)

    walk(cfg, "")


def _undecodable_yaml(cp: ConfigPath) -> Path | None:
    """The first YAML file on the search path that is not UTF-8, or None."""
    for folder in cp.dirs():
        for path in sorted(Path(str(folder)).rglob("*.yaml")):
            try:
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                return path
            except OSError:
                continue
    return None


def _refuse_secrets(overrides: Sequence[str]) -> None:
    """A credential on the command line would be copied into Hydra's run files and our records."""
    from evoharness.compiler.secrets import find_secret

    for ov in overrides:
        key, _, value = ov.partition("=")
        name = key.lstrip("+~")
        if find_secret({name: value}):
            # a model key has one place (api_key_env); a database URL has none, so it comes whole from the environment
            fix = (f"export the URL in an environment variable and pass {name}='${{oc.env:YOUR_VAR}}' (the password is masked "
                   "in every record)" if name.endswith("storage") else
                   "keys are read only from the environment: export it and put the variable's NAME in model.api_key_env")
            raise UsageError(f"{name}: the value looks like a credential and would be written into the run's records. Fix: {fix}")


def _refuse_no_ops(overrides: Sequence[str]) -> None:
    """``key={}`` merges nothing into an existing mapping (Hydra merges dict overrides): the user
    meant to clear it, and would get the old mapping without a word."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException:
        return  # _combinations reports it
    for ov in parsed:
        if not ov.is_delete() and not ov.is_sweep_override() and ov.value() == {}:
            key = ov.get_key_element()
            raise UsageError(f"{key}={{}}: a mapping override merges into the existing one, so an empty mapping changes nothing. "
                             f"Fix: remove entries with ~{key.lstrip('+')}.<name>, or set the ones you want")


def writable_dir(key: str, value: object) -> None:
    """``value`` is, or can be created as, a directory this process may write (checked without creating it)."""
    trouble = unwritable(str(value))
    if trouble is None:
        return
    probe, why = trouble
    if why == "file":
        raise ConfigError(key, f"{value!r} is under {probe}, which is a file, not a folder", f"point {key} at a folder")
    raise ConfigError(key, f"{value!r} cannot be written ({probe}: {why})",
                      f"point {key} at a folder you can write, e.g. {key}={'runs/cache' if key == 'cache_dir' else 'runs'}")


def _compose(overrides: list[str], cp: ConfigPath, *, with_hydra: bool = False, keep: bool = False,
             for_run: bool = False) -> DictConfig:
    """The config composed on search path ``cp`` with ``overrides``, outside any run, exactly as
    ``hydra.main`` will (``--config-dir`` first, the searchpath entries after the package's conf/);
    a composition error is one UsageError line. With ``keep`` the composition stays initialized
    (the caller clears it), so validation can look further names up on the same search path.
    ``for_run`` composes what Hydra's own run would (its config and logging settings included), for
    ``run_composed`` to run without composing again."""
    from hydra import compose
    from hydra._internal.hydra import Hydra
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    searchpath = cp.searchpath_override()
    full = [*overrides, *([searchpath] if searchpath else [])]
    try:
        hydra = Hydra.create_main_hydra2(task_name="evoharness", config_search_path=cp.hydra_search_path())
        if for_run:
            return hydra.compose_config(config_name=cp.primary, overrides=full, run_mode=RunMode.RUN, with_log_configuration=True)
        return compose(config_name=cp.primary, overrides=full, return_hydra_config=with_hydra)
    except ConfigError:
        keep = False
        raise
    except Exception as exc:  # Hydra/OmegaConf composition and validation errors
        keep = False
        raise UsageError(_one_line_hydra_error(exc, overrides, cp)) from None
    finally:
        if not keep:
            GlobalHydra.instance().clear()


def preflight(argv: Sequence[str], validate: Validator | None, cp: ConfigPath | None = None, *,
              for_run: bool = False) -> DictConfig | None:
    """Compose and validate every combination of ``argv``'s overrides. With ``for_run`` (a single
    run, no sweep) the one composition is Hydra's own run config, returned for ``run_composed``;
    Hydra is left initialized on it. Otherwise None."""
    from hydra.core.global_hydra import GlobalHydra

    cp = cp or ConfigPath()
    overrides, multirun = _split_overrides(argv)
    _refuse_secrets(overrides)
    _refuse_no_ops(overrides)
    combos = _combinations(overrides, multirun)
    for_run = for_run and not multirun and len(combos) == 1
    run_cfg: DictConfig | None = None
    for combo in combos:
        # a run's composition carries Hydra's own config, so the command's overrides of hydra.* go in it
        cfg = _compose(overrides if for_run else combo, cp, keep=True, for_run=for_run)
        remember_config(cfg)
        try:
            if not str(cfg.get("runs_dir") or "").strip():
                raise ConfigError("runs_dir", "is empty: outputs would land in the working folder and Hydra's under /",
                                  "set runs_dir=runs (or any folder)")
            from evoharness.compiler.runtime.cache import is_url

            writable_dir("runs_dir", cfg.runs_dir)
            if cfg.get("registry_dir") and (unwritable(str(cfg.registry_dir)) or (None, ""))[1] == "file":
                writable_dir("registry_dir", cfg.registry_dir)  # every command reads its promoted slot: a file there is named here
            if cfg.get("cache_dir") and is_url(str(cfg.cache_dir)):
                from evoharness.compiler.runtime.redis_cache import check_location

                check_location(str(cfg.cache_dir))  # the server answers, before anything is paid for
            elif cfg.get("cache_dir"):
                writable_dir("cache_dir", cfg.cache_dir)
            _refuse_non_finite(cfg)
            extra = unknown_keys(cfg)
            if extra:
                raise ConfigError(extra[0], "is not a setting of this config group, so nothing would read it",
                                  "check the spelling against the schema in compiler/schema.py, or drop the override")
            if validate is not None:
                validate(cfg, combo)
            if for_run:
                _check_hydra_dirs(cfg, launcher=False)  # a single run launches nothing
                run_cfg = cfg
        except (ConfigError, UsageError):
            raise
        except Exception as exc:  # an interpolation that cannot resolve, a deleted group, a value of the wrong type
            raise UsageError(_one_line_hydra_error(exc, combo, cp)) from None
        finally:
            if run_cfg is None:
                GlobalHydra.instance().clear()
    hydra_overrides = [o for o in overrides if o.lstrip("+~").startswith("hydra")]
    if hydra_overrides and run_cfg is None:
        _check_hydra_overrides(hydra_overrides, cp)
    return run_cfg


def _check_hydra_overrides(overrides: list[str], cp: ConfigPath) -> None:
    """Overrides of Hydra's own config (hydra.run.dir=..., hydra/launcher=...) composed once, so a
    typo or a missing plugin is a line here rather than Hydra's traceback after the run dir exists."""
    _check_hydra_dirs(_compose(overrides, cp, with_hydra=True))


def _check_hydra_dirs(cfg: DictConfig, *, launcher: bool = True) -> None:
    if launcher:
        _check_workers(cfg)
    for key in ("run.dir", "sweep.dir"):
        value = OmegaConf.select(cfg.hydra, key, throw_on_resolution_failure=False)
        if isinstance(value, str) and "${" not in value:
            writable_dir(f"hydra.{key}", value)


def _check_workers(cfg: DictConfig) -> None:
    """A launcher's worker count, resolved (``${evoharness.workers:...}``) and in range, before the sweep dir exists."""
    try:
        n_jobs = OmegaConf.select(cfg.hydra, "launcher.n_jobs")
    except Exception as exc:
        inner: BaseException | None = exc
        while inner is not None and not isinstance(inner, ConfigError):  # OmegaConf wraps what a resolver raises
            inner = inner.__cause__ or inner.__context__
        if inner is not None:
            raise inner from None
        raise UsageError(f"hydra.launcher.n_jobs: {str(exc).splitlines()[0]}. Fix: give a number of workers") from None
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ConfigError("hydra.launcher.n_jobs", f"{n_jobs!r} is not a number of workers",
                          "give a positive count, or -1 for one per core")


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


def _scrubbing(task: Callable[[DictConfig], None]) -> Callable[[DictConfig], None]:
    """The task, in any process a launcher runs it in, with this config's secret values scrubbed
    from logs, from Hydra's saved configs (written before the task starts) and from every file."""
    import functools

    @functools.wraps(task)
    def run(cfg: DictConfig) -> None:
        from evoharness.compiler.plugins import load_plugins
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

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
        except ConfigError as exc:  # found only once the run had started (a snapshot miss): one line, exit 2
            print(f"error: {scrub(str(exc))}", file=sys.stderr)
            raise SystemExit(2) from None

    return run


_SWEEP_DIRS: list[Path] = []  # the sweep dir of each multirun this process started


class NoteSweepDir(Callback):
    """Notes the sweep dir when a multirun starts, so that the sweep's multirun.yaml is scrubbed
    where the sweep ran once it returns or fails: a job scrubs it too, but a job on another machine
    (Ray, SLURM) writes nothing on this one."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _SWEEP_DIRS.append(Path(str(config.hydra.sweep.dir)))


def _scrub_sweep_records() -> None:
    while _SWEEP_DIRS:
        _scrub_file(_SWEEP_DIRS.pop() / "multirun.yaml")


_FLAGS = ("-m", "--multirun", "-h", "--help")  # besides --config-dir DIR


def run_hydra(command: str, argv: Sequence[str], task: Callable[[DictConfig], None], validate: Validator | None) -> int:
    """Preflight, then hand argv to Hydra (which owns multirun, launchers and output dirs)."""
    import hydra
    from evoharness.compiler.schema import register_configs
    from hydra import version
    from hydra.core.global_hydra import GlobalHydra

    version.setbase(VERSION_BASE)  # what hydra.main sets: the pre-run checks and a composed run follow the same rules
    register_configs()
    remember_credential_env()  # before anything can fail and print a value
    watch_env_resolver()
    try:
        cp, argv = resolve_config_path(argv)
        unknown = [a for a in argv if a.startswith("-") and a not in _FLAGS]
        if unknown:
            raise UsageError(f"unknown flag {unknown[0]!r}: evoharness {command} takes Hydra overrides (key=value), -m and "
                             f"--config-dir DIR. Fix: drop it, or write it as an override")
        plain = [*[a for a in argv if not a.startswith("-")], f"hydra.job.name={command}"]
        if any(a in ("-m", "--multirun") for a in argv):
            plain.append("++hydra.callbacks.note_sweep_dir._target_=evoharness.compiler.hydra_app.NoteSweepDir")
        # one run (no sweep, no help) is composed once: the composition validated here is the one that runs
        single = not any(a in _FLAGS for a in argv)
        composed = preflight([*plain, *[a for a in argv if a.startswith("-")]], validate, cp, for_run=single)
    except (ConfigError, UsageError) as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    install_log_scrubber()  # before Hydra logs its first line (a launcher logs every job's overrides)
    saved = sys.argv
    # argparse cannot interleave flags and positional overrides: flags go first.
    flags = [a for a in argv if a.startswith("-")]
    searchpath = cp.searchpath_override()
    sys.argv = [f"evoharness {command}", *flags, *(["--config-dir", cp.first] if cp.first else []),
                *(["--config-name", cp.primary] if cp.primary != "config" else []), *plain, *([searchpath] if searchpath else [])]
    try:
        if composed is not None and composed.hydra.mode in (None, RunMode.RUN):
            run_composed(composed, cp.primary, _scrubbing(task))
        else:
            GlobalHydra.instance().clear()  # hydra.main composes on its own Hydra
            try:
                hydra.main(config_path=CONF_DIR, config_name="config", version_base=VERSION_BASE)(_scrubbing(task))()
            finally:
                _scrub_sweep_records()
    finally:
        sys.argv = saved
        GlobalHydra.instance().clear()
    return 0


def run_composed(cfg: DictConfig, config_name: str, task: Callable[[DictConfig], None]) -> None:
    """Hydra's run of ``task`` on a config Hydra composed for it (what ``hydra.main`` does once it has
    composed the same config twice more: callbacks, the run dir, logging, ``HydraConfig``); a task's
    exception is reported the way ``hydra.main`` reports it."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.utils import run_and_report
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    def run() -> None:
        assert GlobalHydra.instance().is_initialized(), "run_composed needs the Hydra that composed cfg"
        with open_dict(cfg):
            cfg.hydra.mode = RunMode.RUN
        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=config_name)
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=callbacks)
        ret = run_job(hydra_context=context, task_function=task, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None)
        callbacks.on_run_end(config=cfg, config_name=config_name, job_return=ret)
        _ = ret.return_value  # a failed job raises here

    run_and_report(run)
