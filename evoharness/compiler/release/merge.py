"""The release merge: the promoted snapshot replaces the base agent, tool overrides and model,
so a promote followed by a compile ships the winner."""
from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.release.registry import DEFAULT_ROOT, Registry
from evoharness.compiler.release.snapshot import RegistryError, Snapshot, make_snapshot
from evoharness.compiler.secrets import remembered
from evoharness.compiler.variant import content_hash

_RELEASED = ("agent.", "model.", "tool.overrides.")


def promoted_for(cfg: DictConfig) -> Snapshot | None:
    """The snapshot ``cfg`` releases (``cfg.release_slot`` of ``cfg.agent.name``), or None."""
    slot = cfg.get("release_slot")
    if slot is None:
        return None
    try:
        return Registry(str(cfg.get("registry_dir", DEFAULT_ROOT))).promoted(str(cfg.agent.name), str(slot))
    except RegistryError as exc:
        problem, _, fix = str(exc).partition(". Fix: ")
        raise ConfigError(f"release_slot={slot}", problem,
                          f"{fix + '; or ' if fix else ''}build the base config with release_slot=null") from None


def apply_promoted(cfg: DictConfig, overrides: Sequence[str] = ()) -> DictConfig:
    """A new config with the promoted definition merged in (``cfg`` untouched); ``cfg`` itself if none.

    ``overrides`` are the command-line overrides (``HydraConfig.get().overrides.task``): the ones under
    agent., model. and tool.overrides are re-applied on top of the release, and a ``model=X`` choice
    keeps the chosen model, so an explicit override or a sweeper's trial is never silently replaced.
    """
    snapshot = promoted_for(cfg)
    if snapshot is None:
        return cfg
    parsed = _parse(overrides)
    out = copy.deepcopy(cfg)
    where = f"release_slot={cfg.release_slot}"
    foreign: set[str] = set()
    definition = inert(snapshot.definition, foreign)
    if foreign:
        name = sorted(foreign)[0]
        raise ConfigError(where, f"promoted snapshot {snapshot.content_hash[:12]} reads environment variable {name}, which this config "
                          "does not: a snapshot never pulls a variable in by itself",
                          f"read it in your config where it belongs (${{oc.env:{name}}}, as when the snapshot was built), "
                          "or build with release_slot=null")
    takes_model = not any(o.key_or_group == "model" for o in parsed)
    if takes_model:
        _check_endpoint(cfg, definition.get("model") or {}, where, snapshot.content_hash)
    try:
        replace_node(out, "agent", definition["agent"])
        replace_node(out.tool, "overrides", definition["tool_overrides"])
        if takes_model:
            replace_node(out, "model", definition["model"])
    except Exception as exc:  # OmegaConf validation: the definition does not fit this schema
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(where, f"promoted snapshot {snapshot.content_hash[:12]} does not fit the config schema: {first}",
                          "roll it back or set release_slot=null") from None
    for o in parsed:
        if not (o.key_or_group.startswith(_RELEASED) or o.key_or_group == "tool.overrides"):
            continue
        try:
            if o.is_delete():
                parent, _, leaf = o.key_or_group.rpartition(".")
                node = OmegaConf.select(out, parent) if parent else out
                if isinstance(node, DictConfig) and leaf in node:
                    with open_dict(node):
                        del node[leaf]
            else:
                OmegaConf.update(out, o.key_or_group, o.value(), merge=True, force_add=True)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0]
            raise ConfigError(o.input_line, f"cannot apply on top of the promoted snapshot: {first}",
                              "drop the override or set release_slot=null") from None
    return out


def _parse(overrides: Sequence[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    return [o for o in parsed if o.package is None and not o.is_sweep_override() and not o.is_hydra_override()]


def _endpoint(model: Any) -> tuple[str, str | None, str | None]:
    """(provider, api_base, api_key_env): where a request goes and whose key it carries. The provider
    counts too: with no api_base, litellm sends a provider's default key variable to its default host."""
    get = model.get if hasattr(model, "get") else (lambda k: None)
    route, base, key = get("route"), get("api_base"), get("api_key_env")
    return (str(route or "").partition("/")[0], str(base) if base else None, str(key) if key else None)


def known_endpoints(cfg: DictConfig) -> set[tuple[str, str | None, str | None]]:
    """(provider, api_base, api_key_env) triples this installation names: the config's model and every model config."""
    from evoharness.compiler.configpath import group_files

    known = {_endpoint(cfg.get("model") or {})}
    for path in group_files("model").values():  # every model config on the command's search path
        try:
            known.add(_endpoint(OmegaConf.to_container(OmegaConf.load(path), resolve=True)))
        except Exception:  # an unreadable model config names no endpoint (the search reports it when it is used)
            continue
    return known


def _check_endpoint(cfg: DictConfig, model: Mapping[str, Any], where: str, digest: str) -> None:
    """A snapshot chooses the model, not where the key goes: its (api_base, api_key_env) must be one
    the releasing config or a model config already names, or a forged snapshot could send any
    variable as a bearer key to any host."""
    triple = _endpoint(model)
    if triple not in known_endpoints(cfg):
        provider, base, key = triple
        raise ConfigError(where, f"promoted snapshot {digest[:12]} sends the key in {key!r} to api_base {base!r} "
                          f"of provider {provider!r}, which neither this config nor any model config on the search path names",
                          "roll the slot back, or add a model config with that route and endpoint if you trust it")


_INTERPOLATION = re.compile(r"(\\*)\$\{(oc\.env:([A-Za-z_][A-Za-z0-9_]*)\})?")


def inert(value: Any, foreign: set[str] | None = None) -> Any:
    """A snapshot is data: every ``${...}`` in it is escaped so OmegaConf keeps it as text, never
    resolving it (a forged ``${oc.env:AWS_SECRET_ACCESS_KEY}`` would otherwise put that variable in
    the prompt). The one exception is the marker a scrubbed secret left, ``${oc.env:NAME}``, for a
    variable the releasing config itself reads; markers of other variables are added to ``foreign``."""
    if isinstance(value, str):
        def escape(m: re.Match[str]) -> str:
            slashes, marker, name = m.group(1), m.group(2), m.group(3)
            if marker and not slashes:
                if remembered(name):
                    return m.group(0)
                if foreign is not None:
                    foreign.add(name)
            # n literal backslashes before a literal "${" are written as 2n of them and "\${"
            return "\\" * (2 * len(slashes)) + "\\${" + (marker or "")
        return _INTERPOLATION.sub(escape, value)
    if isinstance(value, Mapping):
        return {k: inert(v, foreign) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [inert(v, foreign) for v in value]
    return value


def replace_node(parent: DictConfig, key: str, value: Mapping[str, Any]) -> None:
    """``parent[key]`` replaced by ``value``, checked against the node's schema (the release's one step,
    also what promote checks a snapshot with)."""
    schema = OmegaConf.get_type(parent, key)
    # A structured node only accepts a node of its own type: build one so the schema checks the values.
    node = OmegaConf.merge(OmegaConf.structured(schema), dict(value)) if dataclasses.is_dataclass(schema) else dict(value)
    parent[key] = node


def snapshot_from_config(
    cfg: DictConfig,
    *,
    author: str,
    parent_hash: str | None = None,
    metrics: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Snapshot:
    """Snapshot what ``cfg`` compiles: its agent, tool overrides and model (the config must compile)."""
    from evoharness.compiler.config_compile import compile_config, plain_agent, to_plain
    from evoharness.compiler.provenance import git_revision

    definition = {"agent": plain_agent(cfg.agent), "tool_overrides": to_plain(cfg.tool.overrides) or {}, "model": to_plain(cfg.model)}
    recorded = {"variant_hash": compile_config(cfg).content_hash, "config_hash": content_hash(to_plain(cfg)), **dict(provenance or {})}
    if "git_revision" not in recorded:
        recorded["git_revision"] = git_revision()
    return make_snapshot(str(cfg.agent.name), definition, author=author, parent_hash=parent_hash, metrics=metrics, provenance=recorded)
