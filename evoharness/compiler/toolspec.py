"""ToolSpec: the model-facing definition of one tool, as plain frozen data."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it; the implementation is bound by the workload.

    Attributes:
        name: The identifier the model calls, unique within an agent.
        description: What the tool does, shown to the model.
        parameters: A JSON-schema object (``{"type": "object", "properties": {...}}``).
        rules: Usage rules rendered into the system prompt.
        examples: Example calls shown with the tool.
        mutates_state: Whether a call can change the environment.
        group: The owning API or class, e.g. ``"GorillaFileSystem"``.

    Raises:
        Never raises: a catalog's schemas are checked when a config uses them (a ConfigError
        naming the first bad node).
    """

    name: str  # identifier the model calls, unique within an agent
    description: str  # what the tool does, shown to the model
    parameters: Mapping[str, Any] = field(default_factory=dict)  # JSON-schema object (type: object)
    rules: tuple[str, ...] = ()  # usage rules rendered into the system prompt
    examples: tuple[str, ...] = ()  # example calls shown with the tool
    mutates_state: bool = False  # whether a call can change the environment
    group: str = ""  # owning API/class, e.g. "GorillaFileSystem"

    def properties(self) -> Mapping[str, Any]:
        props = self.parameters.get("properties", {})
        return props if isinstance(props, Mapping) else {}

    def required(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required", ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": json.loads(json.dumps(self.parameters)),
            "rules": list(self.rules),
            "examples": list(self.examples),
            "mutates_state": self.mutates_state,
            "group": self.group,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        return cls(
            name=data["name"],
            description=data.get("description", ""),
            parameters=data.get("parameters", {}) or {"type": "object", "properties": {}},
            rules=tuple(data.get("rules", ())),
            examples=tuple(data.get("examples", ())),
            mutates_state=bool(data.get("mutates_state", False)),
            group=data.get("group", ""),
        )
