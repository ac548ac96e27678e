"""The tool catalog: tools from a registered source plus YAML definitions, with overrides.

Resolving an agent's tool list against the catalog is pure: config in, ToolSpecs out.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.plugins import NamedRegistry
from evoharness.compiler.toolspec import JSON_TYPES, ToolSpec

CatalogLoader = Callable[[], Sequence[ToolSpec]]

CATALOGS: NamedRegistry[CatalogLoader] = NamedRegistry("tool catalog", decorator="@register_tool_catalog")


def register_tool_catalog(name: str) -> Callable[[CatalogLoader], CatalogLoader]:
    """Decorator: make ``tool.source=<name>`` load tools from the decorated function, a loader
    called with no arguments that returns a sequence of ``ToolSpec``.

    Args:
        name: The catalog's name, as ``tool.source`` names it.

    Raises:
        Never raises here; an unknown ``tool.source`` is a ConfigError naming the registered catalogs.
    """
    return CATALOGS.register(name)


def _loader(name: str) -> CatalogLoader:
    return CATALOGS.lookup(name, path="tool.source")


def validate_parameters(path: str, schema: Any) -> None:
    """Reject a parameter schema a provider would refuse, naming the first bad node."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ConfigError(path, f"parameters must be a JSON schema with type 'object', got {schema!r}",
                          "write {type: object, properties: {...}}")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise ConfigError(f"{path}.properties", f"must be a mapping, got {props!r}", "map each argument name to its schema")
    for arg, sub in props.items():
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{path}.properties.{arg}", f"must be a schema mapping, got {sub!r}",
                              "give the argument a {type: ..., description: ...} mapping")
        types = sub.get("type")
        for t in types if isinstance(types, list) else ([types] if types is not None else []):
            if t not in JSON_TYPES:
                raise ConfigError(f"{path}.properties.{arg}.type", f"unknown JSON-schema type {t!r}", f"use one of {list(JSON_TYPES)}")
    required = schema.get("required", [])
    missing = [r for r in required if r not in props]
    if missing:
        raise ConfigError(f"{path}.required", f"names arguments that are not in properties: {missing}",
                          "remove them or add them to properties")


def _checked(schema: type, data: Any, path: str) -> dict[str, Any]:
    """Validate one entry against its dataclass schema, naming the bad field."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), data)
        return OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or ""
        first = str(exc).splitlines()[0]
        raise ConfigError(f"{path}.{key}".rstrip("."), first, f"see {schema.__name__} in compiler/schema.py") from None


def build_catalog(tool_cfg: Mapping[str, Any]) -> dict[str, ToolSpec]:
    """Catalog = source tools + YAML definitions, then overrides applied by name."""
    from evoharness.compiler.schema import ToolDefinitionConfig, ToolOverrideConfig

    catalog: dict[str, ToolSpec] = {}
    source = tool_cfg.get("source")
    if source:
        for spec in _loader(str(source))():
            catalog[spec.name] = spec
    if tool_cfg.get("callables"):
        from evoharness.compiler.callables import callable_tools

        for name, (spec, _) in callable_tools(list(tool_cfg["callables"])).items():
            if name in catalog:  # the environment would still dispatch the source's tool: the model would read one, run another
                raise ConfigError("tool.callables", f"{name!r} is already a tool of catalog {source!r}",
                                  f"name the function otherwise (@tool(name=...)), or edit the catalog's with tool.overrides.{name}")
            catalog[name] = spec
    for name, raw in (tool_cfg.get("definitions") or {}).items():
        if name in catalog:
            raise ConfigError(f"tool.definitions.{name}", f"has the name of a tool the catalog already has ({source or 'callables'})",
                              f"edit that tool with tool.overrides.{name} (description, rules, examples), or pick another name")
        d = _checked(ToolDefinitionConfig, raw, f"tool.definitions.{name}")
        params = d.get("parameters") or {"type": "object", "properties": {}}
        validate_parameters(f"tool.definitions.{name}.parameters", params)
        catalog[name] = ToolSpec(
            name=name,
            description=d["description"],
            parameters=params,
            rules=tuple(d.get("rules", ())),
            examples=tuple(d.get("examples", ())),
            mutates_state=bool(d.get("mutates_state", False)),
            group=d.get("group", ""),
        )
    for name, raw in (tool_cfg.get("overrides") or {}).items():
        o = _checked(ToolOverrideConfig, raw, f"tool.overrides.{name}")
        if name not in catalog:
            raise ConfigError(f"tool.overrides.{name}", "overrides a tool that is not in the catalog",
                              f"fix the name; catalog has e.g. {sorted(catalog)[:5]}")
        spec = catalog[name]
        description = str(o["description"]) if o.get("description") is not None else spec.description
        if o.get("description_append"):
            description = f"{description.rstrip()} {o['description_append']}".strip()
        catalog[name] = replace(
            spec,
            description=description,
            rules=spec.rules + tuple(o.get("rules", ())),
            examples=spec.examples + tuple(o.get("examples", ())),
        )
    for name, spec in catalog.items():
        validate_parameters(f"tool[{name}].parameters", spec.parameters)
    return catalog


def select_tools(patterns: Iterable[str], catalog: Mapping[str, ToolSpec]) -> tuple[ToolSpec, ...]:
    """Resolve names/globs in order, without duplicates; a pattern that matches nothing is an error."""
    chosen: dict[str, ToolSpec] = {}
    patterns = list(patterns)
    if not patterns:  # a tool loop with nothing to call measures only how well the model declines
        raise ConfigError("agent.tools", "selects no tools", "list tool names or patterns, e.g. agent.tools=['*'] for the whole catalog")
    for i, pattern in enumerate(patterns):
        matches = ([n for n in catalog if fnmatch.fnmatchcase(n, pattern)] if any(c in pattern for c in "*?[")
                   else ([pattern] if pattern in catalog else []))
        if not matches:
            close = sorted(n for n in catalog if pattern.lower() in n.lower() or n.lower() in pattern.lower())[:5]
            hint = f"did you mean {close}?" if close else "define it under tool.definitions or pick a catalog tool"
            raise ConfigError(f"agent.tools[{i}]", f"unknown tool {pattern!r}", hint)
        for name in matches:
            chosen.setdefault(name, catalog[name])
    return tuple(chosen.values())
