"""Before a slot moves, the snapshot must be one the next compile can release.

``promote`` composes the config the release is compiled from (the primary config plus the
overrides given after the ref, composed and preflighted as compile does). It merges the
snapshot's definition in with the release merge's own code (``compiler/release/merge.py``) and
compiles the result in memory. Nothing is written. A snapshot that does not fit the schema or
does not compile is refused here, naming the field, so the error does not land on whoever
compiles next.

Two release checks depend on the exact config compile is given, which promote may not know:
the model endpoint (api_base and api_key_env must be ones that config names) and the environment
variables a snapshot may read. They are left to compile, which enforces both on every release.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import NAME_RULE, is_name
from evoharness.compiler.release.snapshot import RegistryError, Snapshot

_FIX = ("promote a snapshot built from a config that compiles (`evoharness snapshot [overrides]`); "
        "if it compiles only with other overrides, give them after the ref")


class _Unreleasable(ConfigError):
    """The snapshot's own fault (not the composed config's): the preflight passes a ConfigError through as it is."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _merged(cfg: DictConfig, definition: Mapping[str, Any]) -> DictConfig:
    """``cfg`` with the definition in its place, by the release merge's own steps; a part that does
    not fit its schema is named down to the field."""
    from evoharness.compiler.release.merge import inert, replace_node

    plain = inert(definition)  # data, as the release treats it: no ${...} in it resolves
    out = copy.deepcopy(cfg)
    for parent, key, part in ((out, "agent", "agent"), (out.tool, "overrides", "tool_overrides"), (out, "model", "model")):
        value = plain.get(part)
        if not isinstance(value, Mapping):
            raise _Unreleasable(part, f"is {type(value).__name__}, not a mapping", _FIX)
        try:
            replace_node(parent, key, value)
        except Exception as exc:  # OmegaConf validation: the value does not fit the schema
            inner = getattr(exc, "full_key", "") or ""
            raise _Unreleasable(f"{part}.{inner}" if inner else part, _first_line(exc), _FIX) from None
    return out


def _compiles(cfg: DictConfig, snapshot: Snapshot) -> None:
    from evoharness.compiler.config_compile import compile_config

    released = _merged(cfg, snapshot.definition)
    try:
        compile_config(released)
    except ConfigError as exc:
        raise _Unreleasable(exc.path, exc.problem, _FIX) from None
    except Exception as exc:  # an interpolation or a value compile cannot use
        inner = getattr(exc, "full_key", "") or "definition"
        raise _Unreleasable(str(inner), _first_line(exc), _FIX) from None


def check_releasable(snapshot: Snapshot, overrides: Sequence[str]) -> None:
    """Raise a one-line RegistryError unless ``snapshot`` compiles in the release config."""
    short = snapshot.content_hash[:12]
    if snapshot.kind != "agent":
        raise RegistryError(f"snapshot {short} is of kind {snapshot.kind!r}; compile releases only agent snapshots. "
                            "Fix: promote an agent snapshot")
    if not is_name(snapshot.component):
        # the component is agent.name: the slot is keyed by it and compiled files are named after it
        raise RegistryError(f"snapshot {short} cannot be released: its component {snapshot.component!r} is not a plain name. "
                            f"Fix: rebuild it from an agent whose name uses {NAME_RULE}")
    from hydra import version

    from evoharness.compiler.hydra_argv import resolve_config_path
    from evoharness.compiler.hydra_errors import UsageError
    from evoharness.compiler.preflight import VERSION_BASE, preflight
    from evoharness.compiler.schema import register_configs
    from evoharness.compiler.secrets import remember_credential_env, watch_env_resolver

    version.setbase(VERSION_BASE)
    register_configs()
    remember_credential_env()
    watch_env_resolver()
    try:
        cp, argv = resolve_config_path(list(overrides))
        preflight(argv, lambda cfg, _combo: _compiles(cfg, snapshot), cp)
    except _Unreleasable as exc:
        raise RegistryError(f"snapshot {short} cannot be released: {exc.path}: {exc.problem.rstrip('.')}. Fix: {exc.fix}") from None
    except (ConfigError, UsageError) as exc:
        shown = " ".join(overrides) or "no overrides"
        raise RegistryError(f"the release config ({shown}) that snapshot {short} is checked against does not compose: {exc}") from None
