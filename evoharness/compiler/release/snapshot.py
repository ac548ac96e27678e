"""A registry snapshot: one agent version as plain data, named by the hash of its definition (only
what rebuilds the variant), checked on the way in (consistent, no credential) and on the way out
(a file that no longer hashes to its name is refused)."""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.compiler.names import is_name
from evoharness.compiler.secrets import find_secret, holds_secret, scrub_data
from evoharness.compiler.variant import content_hash

SCHEMA_VERSION = 1
DEFINITION_KEYS = ("agent", "tool_overrides", "model")
_HASH = re.compile(r"[0-9a-f]{64}")


def is_digest(text: str) -> bool:
    """Whether ``text`` is a full snapshot hash (a sha256 hex digest), as a snapshot file is named."""
    return _HASH.fullmatch(text) is not None


class RegistryError(ValueError):
    """Bad registry input or state: one line naming the bad value and the fix (the CLI exits 2)."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def definition_hash(component: str, kind: str, definition: Mapping[str, Any], schema_version: int = SCHEMA_VERSION) -> str:
    """The snapshot's identity: only what rebuilds the variant, so metrics or authorship never fork it."""
    return content_hash({"schema_version": schema_version, "component": component, "kind": kind, "definition": _ordered(kind, definition)})


def _ordered(kind: str, definition: Mapping[str, Any]) -> Mapping[str, Any]:
    # canonical JSON sorts keys, but prompt sections render in mapping order: hash them as pairs so a
    # reordered prompt is a different snapshot (and a reordered file fails verification)
    agent = definition.get("agent")
    if kind != "agent" or not isinstance(agent, Mapping) or not isinstance(agent.get("prompt_sections"), Mapping):
        return definition
    return {**definition, "agent": {**agent, "prompt_sections": [[k, v] for k, v in agent["prompt_sections"].items()]}}


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    schema_version: int = SCHEMA_VERSION
    component: str  # the agent name: promotions and the release merge are keyed by it
    kind: str = "agent"
    content_hash: str
    parent_hash: str | None = None
    author: str  # mutator name, or baseline / manual
    created_at: str  # ISO 8601 UTC
    definition: Mapping[str, Any]  # {"agent": ..., "tool_overrides": ..., "model": ...}
    metrics: Mapping[str, Any] = field(default_factory=dict)  # per split: {"train": {...}, "dev": {...}, "holdout": {...}}
    provenance: Mapping[str, Any] = field(default_factory=dict)  # study, trial, round, config_hash, variant_hash, git_revision

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))  # type: ignore[no-any-return]

    def described(self, slot: str) -> str:
        """What a release slot holding this snapshot ships, as promote and compile both say it: the
        snapshot, the variant it compiled to when it was made, and the search trial it came from."""
        p = self.provenance
        where = [f"variant {str(p.get('variant_hash') or '?')[:12]}"]
        if p.get("study") is not None and p.get("trial") is not None:
            where.append(f"study {p['study']}, trial {p['trial']}")
        return f"slot {slot} of {self.component} is snapshot {self.content_hash[:12]} ({', '.join(where)})"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        return cls(**dict(data))


def make_snapshot(
    component: str,
    definition: Mapping[str, Any],
    *,
    author: str,
    kind: str = "agent",
    parent_hash: str | None = None,
    metrics: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    created_at: str | None = None,
) -> Snapshot:
    """Build a checked Snapshot with its content hash; values are copied through JSON (plain data only)."""
    try:
        # secret values become the ${oc.env:NAME} that read them: the registry never holds one
        plain = scrub_data(json.loads(json.dumps({"d": definition, "m": metrics or {}, "p": provenance or {}}, allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise RegistryError(f"snapshot of {component!r} is not plain JSON data ({exc}). "
                            "Fix: pass dicts, lists, strings and numbers") from None
    snapshot = Snapshot(
        component=component,
        kind=kind,
        content_hash=definition_hash(component, kind, plain["d"]),
        parent_hash=parent_hash,
        author=author,
        created_at=created_at or utc_now(),
        definition=plain["d"],
        metrics=plain["m"],
        provenance=plain["p"],
    )
    check_snapshot(snapshot)
    return snapshot


def check_snapshot(snapshot: Snapshot) -> None:
    """Refuse a snapshot that is inconsistent, malformed, or carries a credential."""
    if not snapshot.component or not isinstance(snapshot.component, str):
        raise RegistryError(f"snapshot component {snapshot.component!r} is empty. Fix: use the agent name, e.g. bfcl_agent")
    if not is_name(snapshot.component):  # compile's agent.name rule: a component that names a path is never released
        raise RegistryError(f"snapshot component {snapshot.component!r} is not a plain name. "
                            "Fix: use the agent name, letters, digits, '_', '-' and '.', e.g. bfcl_agent")
    if not snapshot.author:
        raise RegistryError("snapshot author is empty. Fix: name the mutator, or use baseline / manual")
    if snapshot.parent_hash is not None and not _HASH.fullmatch(snapshot.parent_hash):
        raise RegistryError(f"snapshot parent_hash {snapshot.parent_hash!r} is not a sha256 hex digest. "
                            "Fix: pass the parent's content_hash or None")
    if snapshot.kind == "agent":
        missing = [k for k in DEFINITION_KEYS if not isinstance(snapshot.definition.get(k), Mapping)]
        if missing:
            raise RegistryError(f"agent snapshot definition lacks mapping(s) {missing}. Fix: give {{agent, tool_overrides, model}}")
        name = snapshot.definition["agent"].get("name")
        if name != snapshot.component:
            raise RegistryError(f"definition.agent.name {name!r} differs from component {snapshot.component!r}. "
                                "Fix: make them the same agent name")
    expected = definition_hash(snapshot.component, snapshot.kind, snapshot.definition, snapshot.schema_version)
    if snapshot.content_hash != expected:
        raise RegistryError(f"snapshot content_hash {snapshot.content_hash!r} does not match its definition ({expected}). "
                            "Fix: build it with make_snapshot")
    for part in ("definition", "metrics", "provenance"):
        where = find_secret(getattr(snapshot, part), part)
        if where:
            raise RegistryError(
                f"snapshot {where} looks like a secret key; keys never enter the registry. "
                "Fix: remove it, keep the key in an environment variable and put that variable's NAME in model.api_key_env"
            )
    leaked = holds_secret(json.dumps(snapshot.to_dict(), ensure_ascii=False))
    if leaked:
        raise RegistryError(f"snapshot {snapshot.content_hash[:12]} holds the value of environment variable {leaked}; "
                            "a registry entry is shared data and never carries a secret. "
                            f"Fix: drop the ${{oc.env:{leaked}}} from the config it was built from")


def read_snapshot(path: Path) -> Snapshot:
    """Load one snapshot file, refusing any whose content no longer hashes to its recorded hash or name."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"no snapshot file {path}. Fix: give an existing path, a full hash or a unique prefix") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise RegistryError(f"snapshot {path.stem} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]}); "
                            "restore it or delete it") from None
    if not isinstance(data, dict):
        raise RegistryError(f"snapshot {path.stem} is not a JSON object; restore it or delete it")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise RegistryError(f"snapshot {path.stem} has schema_version {data.get('schema_version')!r}; "
                            f"this evoharness reads {SCHEMA_VERSION}. Fix: upgrade evoharness")
    try:
        snapshot = Snapshot.from_dict(data)
        actual = definition_hash(snapshot.component, snapshot.kind, snapshot.definition)
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
        raise RegistryError(f"snapshot {path.stem} is malformed ({type(exc).__name__}: {str(exc)[:200]}); "
                            "restore it or delete it") from None
    named = path.stem if _HASH.fullmatch(path.stem) else None
    if actual != snapshot.content_hash or (named is not None and named != actual):
        raise RegistryError(f"snapshot {named or snapshot.content_hash} was modified after it was written (content hashes to {actual}); "
                            "restore it or delete it")
    return snapshot
