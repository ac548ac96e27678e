"""A Hydra command's argv: the flags it takes, and the config search path it composes with
(``--config-dir``, ``--config-name``, ``hydra.searchpath`` and the plugins' config dirs)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evoharness.compiler.configpath import ConfigPath, as_url
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.hydra_errors import UsageError, parse_error


def split_overrides(argv: Sequence[str]) -> tuple[list[str], bool]:
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
            raise UsageError(parse_error([ov], str(exc).strip().splitlines()[0])) from None
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
    overrides, _ = split_overrides(rest)
    user, plain = _user_searchpath(overrides)
    flags = [a for a in rest if a.startswith("-")]
    installed = [f"file://{d}" for d in load_plugins(entry_points=True)]
    cp = ConfigPath(first=first, extra=tuple(dict.fromkeys([*user, *installed])), primary=primary)
    named = plugins_named(plain, cp)
    if named:
        more = [f"file://{d}" for d in load_plugins(named, entry_points=False)]
        cp = ConfigPath(first=first, extra=tuple(dict.fromkeys([*cp.extra, *more])), primary=primary)
    return cp, [*flags, *plain]


def load_argv_plugins(argv: Sequence[str]) -> list[str]:
    """For a command that is no Hydra app (``serve-sim``): import the installed plugins and those a
    ``plugins=[...]`` argument names, as every Hydra command does (their workloads register);
    returns argv without that argument."""
    from evoharness.compiler.plugins import load_plugins

    given = [a for a in argv if a.lstrip("+~").split("=", 1)[0] == "plugins"]
    load_plugins(entry_points=True)
    named = plugins_named(given, ConfigPath()) if given else []
    if named:
        load_plugins(named, entry_points=False)
    return [a for a in argv if a not in given]


def plugins_named(overrides: Sequence[str], cp: ConfigPath) -> list[str]:
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
            raise UsageError(parse_error(given, str(exc).strip().splitlines()[0])) from None
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
