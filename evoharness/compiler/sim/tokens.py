"""Token counts from the real messages: litellm's bundled tokenizer, offline.

litellm ships tiktoken's cl100k files and points TIKTOKEN_CACHE_DIR at them, so counting needs no
network. The prompt is counted the way OpenAI chat prompts are, with per-text caching because
the same system prompt and tool list are re-sent on every call of an episode:

    prompt_tokens = 3 + sum over messages (3 + tokens(content) + tokens(name + arguments) per
                    tool call) + tools_tokens

where tools_tokens is litellm's own count for the tool definitions. If litellm is unavailable
the documented fallback is ceil(chars / 4) per text (and for the tools' JSON).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

PER_MESSAGE = 3  # role and separators, as in OpenAI's accounting
REPLY_PRIMING = 3


@lru_cache(maxsize=1)
def _counter() -> Any | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:  # documented fallback: ceil(chars / 4)
        return None
    return litellm.token_counter


@lru_cache(maxsize=8192)
def count_text_tokens(text: str) -> int:
    if not text:
        return 0
    counter = _counter()
    if counter is None:
        return math.ceil(len(text) / 4)
    return int(counter(model="sim/small", text=text))


def _message_text(message: Mapping[str, Any]) -> tuple[str, ...]:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    parts = [str(content or "")]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')}{fn.get('arguments', '')}")
    return tuple(parts)


@lru_cache(maxsize=256)
def count_tools_tokens(tools_text: str) -> int:
    """Tokens of the tool definitions as litellm counts them (the compact form OpenAI bills)."""
    tools = json.loads(tools_text or "[]")
    if not tools:
        return 0
    counter = _counter()
    if counter is None:
        return math.ceil(len(tools_text) / 4)
    probe = [{"role": "user", "content": ""}]
    return max(0, int(counter(model="sim/small", messages=probe, tools=tools))
               - int(counter(model="sim/small", messages=probe)))


def count_prompt_tokens(messages: Sequence[Mapping[str, Any]], tools_text: str = "") -> int:
    total = REPLY_PRIMING + count_tools_tokens(tools_text)
    for message in messages:
        total += PER_MESSAGE + sum(count_text_tokens(t) for t in _message_text(message))
    return total


def tools_json(tools: Sequence[Mapping[str, Any]] | None) -> str:
    # key order kept: parameter order matters (a sibling tool takes the gold values in order)
    return json.dumps(list(tools or []), default=str)
