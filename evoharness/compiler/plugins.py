"""Extension points registered by name: workloads, tool catalogs, mutators, model providers.

An entry comes from one of three places, looked up in this order:

1. a ``register(name)`` decorator (how a user adds one in their own code);
2. a built-in: an entry point of evoharness's own distribution, in the group
   ``evoharness.<kind>s`` (declared in its pyproject.toml, so no module here names a module of a
   higher layer). Its value is an import path, imported only when that name is used (bfcl-eval,
   say, is imported only when the bfcl workload is used): ``"module:attribute"`` is the entry
   itself; a bare ``"module"`` is a module whose import registers the entry with the decorator,
   for modules that hold many entries (the mutators);
3. an entry point of another installed distribution, in the same group (for
   ``[project.entry-points."evoharness.mutators"] my_mutator = "my_pkg.mutators"``), read only
   when the name is in neither of the above: a plugin cannot take a built-in's name.

A **plugin** is a module that registers any number of entries when imported and may bring its own
config dir (``CONFIG_DIR``, a folder of YAML groups: ``workload/``, ``agent/``, ``model/``, ...,
and ``templates/``). Plugins are named by an entry point in the group ``evoharness.plugins``
(installed packages: loaded by every command) or by the ``plugins: [module, ...]`` config key;
``load_plugins`` imports them before the config is composed for good, and their config dirs join
Hydra's search path.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, TypeVar

from evoharness.compiler.errors import ConfigError

T = TypeVar("T")
DISTRIBUTION = "evoharness"  # whose entry points are the built-ins


def _entry_points(group: str, *, own: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in metadata.entry_points(group=group):
        if (ep.dist is not None and ep.dist.name == DISTRIBUTION) == own:
            found.setdefault(ep.name, f"{ep.module}:{ep.attr}" if ep.attr else ep.module)
    return found


class NamedRegistry(Generic[T]):
    def __init__(self, kind: str, *, decorator: str, group: str | None = None, builtins: Mapping[str, str] | None = None) -> None:
        self.kind = kind  # e.g. "workload", for messages
        self.decorator = decorator  # how a user registers one, for messages
        self.group = group or f"evoharness.{kind.replace(' ', '_')}s"
        # name -> "module:attribute" or "module" (which registers name on import); None: this
        # distribution's own entry points in the group
        self._builtins = dict(builtins) if builtins is not None else None
        self._entries: dict[str, T] = {}
        self._plugins: dict[str, str] | None = None  # entry-point name -> import path, read once

    @property
    def builtins(self) -> dict[str, str]:
        """The built-ins: name -> import path, not imported."""
        if self._builtins is None:  # read once: installed distributions do not change during a run
            self._builtins = _entry_points(self.group, own=True)
        return self._builtins

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(entry: T) -> T:
            self._entries[name] = entry
            return entry

        return decorate

    def plugins(self) -> dict[str, str]:
        """Entry points of other installed distributions in this registry's group, not imported."""
        # Cached: scanning every distribution's metadata costs milliseconds, and ensure_providers
        # asks for every model call; installed distributions do not change during a run.
        if self._plugins is None:
            self._plugins = _entry_points(self.group, own=False)
        return self._plugins

    def names(self) -> list[str]:
        return sorted(set(self._entries) | set(self.builtins) | set(self.plugins()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._entries or name in self.builtins or name in self.plugins())

    def get(self, name: str) -> T:
        if name not in self._entries:
            target = self.builtins.get(name) or self.plugins().get(name)
            if target is None:
                raise KeyError(
                    f"unknown {self.kind} {name!r}; known: {self.names()}; "
                    f"register one with {self.decorator} or an entry point in group {self.group!r}"
                )
            self._load(name, target)
        return self._entries[name]

    def lookup(self, name: str, *, path: str) -> T:
        """``get`` for a name found at config ``path``: an unknown name is a one-line ConfigError there."""
        if name not in self:
            raise ConfigError(path, f"unknown {self.kind} {name!r}",
                              f"use one of {self.names()}, or register one with {self.decorator} or an entry point in group {self.group!r}")
        try:
            return self.get(name)
        except ImportError as exc:  # an entry point whose module is gone: named, with where it was declared
            raise ConfigError(path, str(exc), "reinstall or uninstall the distribution that declares it, "
                              "or correct the entry point's module path") from None

    def _load(self, name: str, target: str) -> None:
        try:
            self._import(name, target)
        except (ImportError, AttributeError) as exc:
            source = "built-in" if self.builtins.get(name) == target else f"entry point in group {self.group!r}"
            raise ImportError(f"{self.kind} {name!r} ({source} {target!r}) cannot be imported: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc

    def _import(self, name: str, target: str) -> None:
        module, _, attr = target.partition(":")
        if attr:
            entry: Any = importlib.import_module(module)
            for part in attr.split("."):
                entry = getattr(entry, part)
            self._entries[name] = entry
            return
        before = dict(self._entries)
        importlib.import_module(module)
        # A name a user registered before this import keeps the user's entry: which built-in
        # module happens to be imported first must not decide whose entry wins.
        self._entries.update(before)
        if name not in self._entries:
            raise ImportError(f"{self.kind} {name!r}: importing {module} did not register it with {self.decorator}")


PLUGIN_GROUP = "evoharness.plugins"


def plugin_entry_points() -> dict[str, tuple[str, str]]:
    """``evoharness.plugins`` entry points of installed distributions: name -> (import path, distribution)."""
    return {ep.name: (ep.value, ep.dist.name if ep.dist is not None else "an unknown distribution")
            for ep in metadata.entry_points(group=PLUGIN_GROUP)}


def load_plugins(modules: Sequence[str] = (), *, entry_points: bool = True) -> list[Path]:
    """Import every plugin (the installed ones, then ``modules`` from the ``plugins`` config key)
    and return their config dirs, in that order. A plugin that cannot be imported, or whose
    ``CONFIG_DIR`` is not a folder, is a ConfigError naming it."""
    found = sorted(plugin_entry_points().items()) if entry_points else []
    named = [(f"entry point {n!r} of {dist} (group {PLUGIN_GROUP})", v) for n, (v, dist) in found]
    named += [(f"plugins[{i}]", str(m)) for i, m in enumerate(modules)]
    dirs: list[Path] = []
    for where, target in named:
        module = target.partition(":")[0].strip()
        if not module or any(c in module for c in "/\\ ") or module.startswith("."):
            raise ConfigError(where, f"{target!r} is not a module path", "name a module as package.module (no file paths)")
        try:
            plugin = importlib.import_module(module)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a plugin's own import error (or exit) is its one line
            why = str(exc).splitlines()[0] if str(exc) else ""
            fix = ("reinstall or uninstall that distribution" if where.startswith("entry point")
                   else "install the package that provides it, or correct the module name")
            raise ConfigError(where, f"cannot import plugin {module!r} ({type(exc).__name__}: {why})", fix) from None
        conf = getattr(plugin, "CONFIG_DIR", None)
        if conf is None:
            continue
        folder = Path(str(conf))
        if not folder.is_dir():
            raise ConfigError(where, f"plugin {module!r} declares CONFIG_DIR={str(conf)!r}, which is not a folder",
                              "point CONFIG_DIR at the plugin's folder of YAML config groups")
        if folder.resolve() not in [d.resolve() for d in dirs]:
            dirs.append(folder.resolve())
    return dirs
