"""Tool-call arguments as the model wrote them are untrusted: their size and nesting are capped before
any parser sees them, they are checked against the tool's JSON schema (jsonschema) before any backend
sees them, and what is echoed back to the model about a bad call is clipped. Every failure here is a
scored model mistake, never a crash."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from evoharness.compiler.toolspec import ToolSpec

MAX_ARGUMENT_CHARS = 65_536  # one call's arguments; a model that writes more has made a mistake
MAX_ECHO_CHARS = 1_000  # the most of a bad value an error message quotes back to the model
# Parsers recurse once per level (json.loads, jsonschema, and litellm's converters, which read the
# arguments of every call echoed back in a later request): deeper text makes them raise RecursionError,
# which litellm turns into a failed request. No tool's parameters come near this many levels.
MAX_ARGUMENT_DEPTH = 64
# The text of one reply kept in the conversation: room for one call at MAX_ARGUMENT_CHARS and the prose
# around it. A model that writes more has made a mistake, and every later request of the episode
# would carry it again.
MAX_REPLY_CHARS = 2 * MAX_ARGUMENT_CHARS

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)  # an unterminated one runs to the end
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters not shown]"


def too_deep(text: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether JSON ``text`` nests brackets more than ``limit`` levels deep outside its strings.
    A linear scan that never recurses, so it is safe on text no parser should be given."""
    depth = 0
    for bracket in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False


def decode_json_arguments(name: str, raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """A native call's arguments text as a JSON object, or the mistake to tell the model."""
    if too_deep(raw[: MAX_ARGUMENT_CHARS + 1]):  # past the size limit the text is refused anyway
        return None, f"arguments of {name} are nested too deeply: the limit is {MAX_ARGUMENT_DEPTH} levels; send a flatter JSON object"
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


def echoed_arguments(raw: str, decoded: bool) -> str:
    """The arguments text a call keeps in the conversation. Every later request carries it, and some
    providers' converters parse it there: on litellm's Anthropic route text that is not a JSON object
    is a BadRequestError, which stops the run, on its Gemini route a connection error, which skips the
    episode. So only text ``decode_json_arguments`` read as an object goes back as written; anything
    else is replaced by an object that says what was left out. The model learns what was wrong from
    the call's error."""
    if decoded:
        return raw
    if len(raw) > MAX_ARGUMENT_CHARS or too_deep(raw[: MAX_ARGUMENT_CHARS + 1]):
        return json.dumps({"omitted_characters": len(raw)})
    return json.dumps({"unreadable_arguments": clip(raw)})


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
