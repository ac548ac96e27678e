"""Where configs come from: Hydra's config search path, as the folders every lookup by name uses.

Hydra's order is the one that counts, so every lookup here follows it: the package's conf/ first,
then a ``--config-dir`` folder, then the ``hydra.searchpath`` entries and the plugins' config dirs.
They add groups and options (a user's own primary config is named with ``--config-name``); a
name the package already has stays the package's.
Model configs named by ``search.models``/``search.teacher`` and prompt templates named by
``agent.template`` resolve through the same folders, so a file that works as ``model=name`` works
in ``search.models`` too. A relative file named in a workload's options is read from the folder
of the config file that names it (``anchored_options``).
"""
from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.hydra_namespace import expose_hydra_plugins
from evoharness.conf import CONF_DIR

expose_hydra_plugins()  # before anything here lets Hydra list its plugins


@dataclass(frozen=True)
class ConfigPath:
    """The search path a command composes with: the package's conf/, ``first`` (``--config-dir``),
    then ``extra`` (``hydra.searchpath`` entries, then plugin dirs, as Hydra URLs); and the name of
    the primary config (``--config-name``)."""

    first: str | None = None
    extra: tuple[str, ...] = ()
    primary: str = "config"

    def urls(self) -> list[str]:
        return [f"file://{CONF_DIR}", *([f"file://{self.first}"] if self.first else []), *self.extra]

    def dirs(self) -> list[Path]:
        return [d for d in (_folder(u) for u in self.urls()) if d is not None]

    def searchpath_override(self) -> str | None:
        """The ``hydra.searchpath=[...]`` override that hands ``extra`` to Hydra (None when empty)."""
        if not self.extra:
            return None
        return "hydra.searchpath=[" + ",".join(_quoted(u) for u in self.extra) + "]"

    def hydra_search_path(self) -> Any:
        """Hydra's own ConfigSearchPath for this path (what ``hydra.main`` builds from the same flags)."""
        from hydra._internal.utils import create_config_search_path
        from hydra.core.config_search_path import SearchPathQuery

        path = create_config_search_path(CONF_DIR)
        if self.first:  # where hydra.main puts --config-dir: after the primary config's folder
            path.prepend(provider="command-line", path=f"file://{self.first}", anchor=SearchPathQuery(provider="schema"))
        for url in self.extra:  # where hydra.searchpath puts them (before the schema source, which Hydra wants last),
            path.prepend(provider="evoharness", path=url, anchor=SearchPathQuery(provider="schema"))  # in its own sources
        return path


def _quoted(url: str) -> str:
    return "'" + url.replace("\\", "\\\\").replace("'", "\\'") + "'"


def as_url(entry: str) -> str:
    """A searchpath entry as Hydra reads it: ``file://``/``pkg://`` kept, a bare path made absolute."""
    if entry.startswith(("file://", "pkg://")):
        return entry
    return f"file://{Path(entry).expanduser().absolute()}"


def _folder(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(url[len("file://"):])
    if url.startswith("pkg://"):
        module = url[len("pkg://"):].replace("/", ".")
        try:
            return Path(str(resources.files(module)))
        except (ModuleNotFoundError, TypeError):
            return None
    return None


def current_dirs() -> list[Path]:
    """The folders of the search path of the command running in this process, in priority order:
    from the running job's Hydra config (any launcher's job process has it; it holds the plugins'
    folders), else from the composition in progress (the preflight), else the package's conf/ alone."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    # a command's HydraConfig is cleared when it ends (hydra_run.run_command): one set here is this command's
    if HydraConfig.initialized():
        sources = HydraConfig.get().runtime.config_sources
        return [d for d in (_folder(f"{s.schema}://{s.path}") for s in sources if s.schema in ("file", "pkg")) if d is not None]
    gh = GlobalHydra.instance()
    if gh.is_initialized() and gh.hydra is not None:
        return [d for d in (_folder(f"{s.scheme()}://{s.path}") for s in gh.hydra.config_loader.get_sources()
                            if s.scheme() in ("file", "pkg")) if d is not None]
    return [Path(CONF_DIR)]


def group_files(group: str, dirs: Sequence[Path] | None = None) -> dict[str, Path]:
    """Every ``<group>/<name>.yaml`` on the search path by name, the first folder's winning."""
    found: dict[str, Path] = {}
    for d in current_dirs() if dirs is None else dirs:
        for f in sorted((d / group).glob("*.yaml")) if (d / group).is_dir() else []:
            found.setdefault(f.stem, f)
    return found


def template_dirs(dirs: Sequence[Path] | None = None) -> tuple[str, ...]:
    """``templates/`` folders on the search path, in priority order (the package's own come last)."""
    return tuple(str(d / "templates") for d in (current_dirs() if dirs is None else dirs) if (d / "templates").is_dir())


def compose_option(group: str, name: str, dirs: Sequence[Path] | None = None) -> Any:
    """``<group>/<name>`` composed by Hydra (its defaults list, interpolations and schema applied)
    from ``dirs`` (first wins), by default the running command's search path (``current_dirs``)."""
    from hydra import compose
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs

    # Always on a search path of its own, even inside a command: a running command's loader may hold
    # its hydra.searchpath (the plugins' config dirs) only in the composition it made, not in its sources.
    gh = GlobalHydra.instance()
    register_configs()  # the structured schemas a group's defaults list names (model_schema, ...)
    order = list(dirs) if dirs is not None else current_dirs()
    path = create_config_search_path(str(order[-1]))
    for d in reversed(order[:-1]):
        path.prepend(provider="evoharness", path=f"file://{d}")
    was = gh.is_initialized()
    saved = gh.hydra if was else None
    gh.clear()
    try:
        Hydra.create_main_hydra2(task_name="evoharness", config_search_path=path)
        return compose(config_name=f"{group}/{name}").get(group)
    finally:
        gh.clear()
        if saved is not None:
            gh.initialize(saved)


# workload options that name a file: a relative one is read from the folder of the config file that names it
FILE_OPTIONS = ("path", "tool_outputs.path")


def portable_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a hash sees them: each file option by its file's name, not where the project
    lives, so a moved or cloned checkout keeps its doctor records and its studies. What the files
    hold is hashed apart (the tasks hash, the replayed tool outputs' hash)."""
    out = copy.deepcopy(dict(options))
    for key in FILE_OPTIONS:
        *parents, leaf = key.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(leaf), str):
            node[leaf] = Path(node[leaf]).name
    return out


def anchored_options(options: Mapping[str, Any], dirs: Sequence[Path] | None = None) -> dict[str, Any]:
    """``workload.options`` with each relative file option (``FILE_OPTIONS``) made absolute: against
    the folder of the config file on the search path whose own text sets it (``workload/<name>.yaml``,
    or a primary config's ``workload:`` block), so a config dir works from any working folder; a
    value no config file sets (a command-line override) against the working folder."""
    out = copy.deepcopy(dict(options))
    for key in FILE_OPTIONS:
        *parents, leaf = key.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        value = node.get(leaf) if isinstance(node, dict) else None
        if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
            node[leaf] = str(_anchored(key, value, current_dirs() if dirs is None else list(dirs)))
    return out


def _anchored(key: str, value: str, dirs: Sequence[Path]) -> Path:
    choice = _workload_choice()
    named = group_files("workload", dirs)
    files = [named[choice]] if choice in named else list(named.values())
    found = [f for f in files if _raw_value(f, f"options.{key}") == value]
    found += [f for d in dirs for f in sorted(d.glob("*.yaml")) if _raw_value(f, f"workload.options.{key}") == value]
    targets = list(dict.fromkeys((f.parent / value).expanduser().resolve() for f in found))
    if len(targets) > 1:  # two config files name the same relative text: the one whose file exists, if only one does
        targets = [t for t in targets if t.exists()] or targets
    if len(targets) > 1:
        raise ConfigError(f"workload.options.{key}", f"{value!r} is set by several config files ({', '.join(map(str, found))}), "
                          "and it names a different file relative to each", "write an absolute path in the one you mean")
    return targets[0] if targets else Path(value).expanduser().absolute()


def _workload_choice() -> str | None:
    """The workload group's option the running command composed (known inside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    choice = HydraConfig.get().runtime.choices.get("workload")
    return str(choice) if choice else None


def _raw_value(file: Path, dotted: str) -> Any:
    """The value ``file``'s own YAML text gives ``dotted`` (before any composition), or None."""
    node: Any = _raw_yaml(file, file.stat().st_mtime_ns)
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


@functools.lru_cache(maxsize=256)
def _raw_yaml(file: Path, _mtime: int) -> Any:
    import yaml

    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # the composition reports a broken file with its own line
