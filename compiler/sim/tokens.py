"""Token counts from the real messages: litellm's bundled tokenizer, offline.

litellm ships tiktoken's cl100k files and points TIKTOKEN_CACHE_DIR at them, so counting needs no
network. If litellm is unavailable the documented fallback is ceil(chars / 4).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any


def _litellm() -> Any | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:  # documented fallback: ceil(chars / 4)
        return None
    return litellm


def _estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


def count_prompt_tokens(messages: Sequence[Mapping[str, Any]],
                        tools: Sequence[Mapping[str, Any]] | None) -> int:
    litellm = _litellm()
    if litellm is None:
        return _estimate(json.dumps(list(messages), default=str) + json.dumps(tools or []))
    kwargs: dict[str, Any] = {"model": "sim/small", "messages": [dict(m) for m in messages]}
    if tools:
        kwargs["tools"] = [dict(t) for t in tools]
    return int(litellm.token_counter(**kwargs))


def count_text_tokens(text: str) -> int:
    if not text:
        return 0
    litellm = _litellm()
    if litellm is None:
        return _estimate(text)
    return int(litellm.token_counter(model="sim/small", text=text))
