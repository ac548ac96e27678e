"""On-disk response cache keyed by the full request, so a finished run replays offline for free."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from compiler.atomic import write_json_atomic
from compiler.variant import canonical_json, content_hash

log = logging.getLogger(__name__)
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _is_reply(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("tool_calls", []), list):
        return False
    if not isinstance(record.get("content"), str | None):
        return False
    calls_ok = all(isinstance(c, dict) and {"id", "name", "arguments"} <= set(c) for c in record.get("tool_calls", []))
    numbers_ok = all(isinstance(record.get(k, 0), int | float) and not isinstance(record.get(k, 0), bool)
                     for k in ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "attempts", "infra_s"))
    return calls_ok and numbers_ok


def request_key(request: Mapping[str, Any]) -> str:
    """sha256 of the canonical request (credentials are never part of it)."""
    return content_hash(dict(request))


class RequestKeyer:
    """``request_key`` for the calls of one route, with each tools list encoded once.

    A variant sends the same tools list on every call (``HarnessVariant.native_tools_for`` hands
    out one list per selection, never changed), and it is three quarters of a request's canonical
    text. The request carries a copy (litellm may adapt what it is given), so the caller names the
    variant's own list as ``tools``: its text is memoised by identity. The key is the same string's
    hash as ``request_key``'s: a canonical object is its sorted members joined, so a memoised member
    splices in unchanged, and a cache filled by one is read by the other."""

    def __init__(self) -> None:
        self._tools: dict[int, tuple[object, str]] = {}  # id -> (the list itself, kept so the id stays its own; its text)

    def _tools_json(self, tools: Sequence[Any]) -> str:
        held = self._tools.get(id(tools))
        if held is None or held[0] is not tools:
            held = (tools, canonical_json(tools))
            self._tools[id(tools)] = held
        return held[1]

    def __call__(self, request: Mapping[str, Any], *, tools: Sequence[Any] | None = None) -> str:
        """The key of ``request``; ``tools`` is the list ``request["tools"]`` was copied from."""
        def member(k: str, v: Any) -> str:
            return self._tools_json(tools) if k == "tools" and tools is not None else canonical_json(v)

        members = ",".join(f"{canonical_json(k)}:{member(k, v)}" for k, v in sorted(request.items()))
        return hashlib.sha256(f"{{{members}}}".encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.writable = True  # until a write fails: then the run goes on uncached (a job on a machine without the folder)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply, or None. An entry that is not a reply (truncated, edited, another
        version's) is a miss: the call is made again and the entry rewritten, never half-trusted."""
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):  # not cached (or no cache folder there): a plain miss
            return None
        except (OSError, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
            log.warning("response cache entry %s is unreadable (%s): asking the model again", path, exc)
            return None
        if not _is_reply(record):
            log.warning("response cache entry %s is not a model reply: asking the model again", path)
            return None
        return record

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store a reply (temp file, then rename: a reader never sees half an entry). A cache that
        cannot be written is an optimisation lost, not an evaluation lost: one warning, then no more tries."""
        if not self.writable:
            return
        try:
            write_json_atomic(self._path(key), value, indent=None, fsync=False)  # a torn entry reads as a miss
        except OSError as exc:
            self.writable = False
            with _WARNED_LOCK:  # writes run in threads, and every evaluation opens the cache anew: one line per folder
                if str(self.root) in _WARNED:
                    return
                _WARNED.add(str(self.root))
            log.warning("response cache %s cannot be written (%s): this run's replies are not cached", self.root, exc)
