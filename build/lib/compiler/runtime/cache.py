"""On-disk response cache keyed by the full request, so a finished run replays offline for free."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compiler.atomic import write_json_atomic
from compiler.variant import content_hash


def request_key(request: Mapping[str, Any]) -> str:
    """sha256 of the canonical request (credentials are never part of it)."""
    return content_hash(dict(request))


class ResponseCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        write_json_atomic(self._path(key), value, indent=None)
