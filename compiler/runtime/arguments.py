"""Tool-call arguments as the model wrote them are untrusted: their size is capped, they are checked
against the tool's JSON schema (jsonschema) before any backend sees them, and what is echoed back to
the model about a bad call is clipped. Every failure here is a scored model mistake, never a crash."""
from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from compiler.toolspec import ToolSpec

MAX_ARGUMENT_CHARS = 65_536  # one call's arguments; a model that writes more has made a mistake
MAX_ECHO_CHARS = 1_000  # the most of a bad value an error message quotes back to the model


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters not shown]"


def decode_json_arguments(name: str, raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """A native call's arguments text as a JSON object, or the mistake to tell the model."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        return None, f"arguments of {name} are {len(raw)} characters long; the limit is {MAX_ARGUMENT_CHARS}"
    try:
        args = json.loads(raw) if raw.strip() else {}
    except RecursionError:
        return None, f"arguments of {name} are nested too deeply to read; send a flat JSON object"
    except ValueError as exc:
        return None, f"arguments of {name} are not valid JSON ({clip(str(exc), 200)}); send a JSON object"
    if not isinstance(args, dict):
        return None, f"arguments of {name} must be a JSON object, got {type(args).__name__}"
    return args, None


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = validators.validator_for(schema)
    return cls(schema)


def schema_mismatch(spec: ToolSpec, arguments: Mapping[str, Any]) -> str | None:
    """None when ``arguments`` fit the tool's parameter schema, else the first mismatch in words."""
    try:
        validator = _validator(json.dumps(dict(spec.parameters), sort_keys=True, default=str))
        error = schema_errors.best_match(validator.iter_errors(dict(arguments)))
    except RecursionError:
        return f"arguments of {spec.name} are nested too deeply to check"
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"arguments of {spec.name} do not match its parameters{f' at {where}' if where else ''}: {clip(error.message, 300)}"
