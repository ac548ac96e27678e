"""Registry: content-addressed agent snapshots, promotion slots with history, the release merge.

Layout under the root (default ``runs/registry/``)::

    snapshots/<sha256>.json  one Snapshot each, never rewritten; named by the hash of its definition
    promotions.json          {component: {slot: [{hash, promoted_at, by, action}, ...]}}; current = last
    .lock                    flock'ed around every write, so concurrent promoters never lose an update

Every file is written to a temp file beside it and renamed into place, so a crash leaves the previous
file. Reads take no lock: a rename is atomic, a reader sees the old file or the new one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.names import is_name
from evoharness.compiler.secrets import find_secret, holds_secret, scrub_data
from evoharness.compiler.variant import content_hash

SCHEMA_VERSION = 1
DEFAULT_ROOT = "runs/registry"
DEFAULT_SLOT = "default"
DEFINITION_KEYS = ("agent", "tool_overrides", "model")
MIN_PREFIX = 6
_HASH = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]+")


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        return cls(**dict(data))


@dataclass(frozen=True)
class Promotion:
    hash: str
    promoted_at: str
    by: str
    action: str = "promote"  # promote | rollback


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


_write_atomic = write_text_atomic


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"  # unsorted: mapping order is meaningful


def check_slot(slot: str) -> None:
    if not is_name(slot):
        raise RegistryError(f"slot {slot!r} is not a valid slot name. Fix: use letters, digits, '_', '-' or '.', e.g. default or fast")


class Registry:
    """One registry root. Writes are atomic and serialized across processes; reads never block."""

    def __init__(self, root: str | os.PathLike[str] = DEFAULT_ROOT) -> None:
        self.root = Path(root)
        self.snapshot_dir = self.root / "snapshots"
        self.promotions_path = self.root / "promotions.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a", encoding="utf-8") as fh:  # "a": create without truncating
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            # a writer killed (SIGKILL) between its temp file and the rename leaves the temp behind:
            # under the lock no write is in flight, so every temp file here is such a leftover
            for stale in [*self.root.glob(".*.tmp"), *self.snapshot_dir.glob(".*.tmp")]:
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def path_of(self, digest: str) -> Path:
        return self.snapshot_dir / f"{digest}.json"

    # -- snapshots ------------------------------------------------------------------------------
    def write_snapshot(self, snapshot: Snapshot) -> str:
        """Store ``snapshot``; writing the same definition again is a no-op that keeps the first record."""
        check_snapshot(snapshot)
        with self._locked():
            self._store(snapshot)
        return snapshot.content_hash

    def _store(self, snapshot: Snapshot) -> None:
        path = self.path_of(snapshot.content_hash)
        if path.exists():
            read_snapshot(path)  # a damaged first record must not hide behind the no-op
            return
        _write_atomic(path, _dumps(snapshot.to_dict()))

    def resolve(self, ref: str | os.PathLike[str]) -> Path:
        """The file of ``ref``: a full hash, a unique prefix of at least 6 hex chars, or a snapshot .json path."""
        text = os.fspath(ref)
        if os.sep in text or text.endswith(".json"):
            return Path(text)
        digest = text.lower()
        if not _HEX.fullmatch(digest):
            raise RegistryError(f"{text!r} is neither a snapshot hash nor a .json path. "
                                f"Fix: give a full hash, a unique prefix of >= {MIN_PREFIX} hex chars, or a path")
        if len(digest) < MIN_PREFIX:
            raise RegistryError(f"hash prefix {text!r} is shorter than {MIN_PREFIX} characters. "
                                f"Fix: give at least {MIN_PREFIX} hex characters")
        matches = (sorted(p for p in self.snapshot_dir.glob(f"{digest}*.json") if _HASH.fullmatch(p.stem))
                   if self.snapshot_dir.is_dir() else [])
        if not matches:
            raise RegistryError(f"no snapshot {text!r} in registry {self.root}. "
                                f"Fix: list them with `evoharness versions --registry {self.root}`")
        if len(matches) > 1:
            shown = ", ".join(p.stem[:12] for p in matches[:5])
            raise RegistryError(f"hash prefix {text!r} is ambiguous: {len(matches)} snapshots match ({shown}). Fix: give more characters")
        return matches[0]

    def load(self, ref: str | os.PathLike[str]) -> Snapshot:
        return read_snapshot(self.resolve(ref))

    def snapshots(self, component: str | None = None) -> list[Snapshot]:
        """Every stored snapshot (of ``component``), oldest first; one that fails its check raises."""
        found, bad = self.scan(component)
        if bad:
            raise RegistryError(bad[0][1])
        return found

    def scan(self, component: str | None = None) -> tuple[list[Snapshot], list[tuple[Path, str]]]:
        """The stored snapshots that pass their check (of ``component``, oldest first), and the
        files that do not, each with why: one tampered file does not hide the others."""
        if not self.snapshot_dir.is_dir():
            return [], []
        found: list[Snapshot] = []
        bad: list[tuple[Path, str]] = []
        for path in sorted(self.snapshot_dir.glob("*.json")):
            if not _HASH.fullmatch(path.stem):
                continue
            try:
                found.append(read_snapshot(path))
            except RegistryError as exc:
                bad.append((path, str(exc)))
        chosen = sorted((s for s in found if component is None or s.component == component), key=lambda s: (s.created_at, s.content_hash))
        return chosen, bad

    # -- promotions -----------------------------------------------------------------------------
    def promotions(self) -> dict[str, dict[str, tuple[Promotion, ...]]]:
        """The whole promotions file: component -> slot -> history, oldest first."""
        try:
            raw = json.loads(self.promotions_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RegistryError(f"{self.promotions_path} is not valid JSON ({exc}). "
                                "Fix: restore it, or delete it to forget all promotions") from None
        try:
            return {c: {s: tuple(Promotion(**e) for e in entries) for s, entries in slots.items()} for c, slots in raw.items()}
        except (AttributeError, TypeError) as exc:
            raise RegistryError(f"{self.promotions_path} is malformed ({exc}). "
                                "Fix: restore it, or delete it to forget all promotions") from None

    def _append(self, component: str, slot: str, entry: Promotion) -> None:
        data = self.promotions()  # caller holds the lock: read-modify-write is serialized
        slots = dict(data.get(component, {}))
        slots[slot] = (*slots.get(slot, ()), entry)
        data[component] = slots
        plain = {c: {s: [dataclasses.asdict(e) for e in h] for s, h in sl.items()} for c, sl in data.items()}
        _write_atomic(self.promotions_path, _dumps(plain))

    def history(self, component: str, slot: str = DEFAULT_SLOT) -> tuple[Promotion, ...]:
        return self.promotions().get(component, {}).get(slot, ())

    def promote(self, ref: str | os.PathLike[str], *, slot: str = DEFAULT_SLOT, by: str = "manual") -> Snapshot:
        """Make ``ref`` the current version of its component in ``slot``; a snapshot given by path is stored first."""
        check_slot(slot)
        snapshot = self.load(ref)
        check_snapshot(snapshot)
        with self._locked():
            self._store(snapshot)
            self._append(snapshot.component, slot, Promotion(snapshot.content_hash, utc_now(), by or "manual"))
        return snapshot

    def promoted(self, component: str, slot: str = DEFAULT_SLOT) -> Snapshot | None:
        """The current snapshot of ``component`` in ``slot`` (hash-verified), or None if never promoted."""
        check_slot(slot)
        entries = self.history(component, slot)
        if not entries:
            return None
        return self._current(component, slot, entries[-1].hash)

    def _current(self, component: str, slot: str, digest: str) -> Snapshot:
        path = self.path_of(digest)
        if not path.exists():
            raise RegistryError(f"{component}/{slot}: promoted snapshot {digest} is missing from {self.snapshot_dir}. "
                                f"Fix: restore it or `evoharness rollback {component}`")
        snapshot = read_snapshot(path)
        if snapshot.component != component:
            raise RegistryError(f"{component}/{slot}: promoted snapshot {digest[:12]} belongs to {snapshot.component!r}. "
                                f"Fix: restore {self.promotions_path}")
        return snapshot

    def rollback(self, component: str, slot: str = DEFAULT_SLOT, *, by: str = "manual") -> Snapshot:
        """Move ``slot`` back to the version promoted before the current one (undo, repeatable)."""
        check_slot(slot)
        if not self.promotions_path.exists():  # nothing to undo: and no lock file left behind either
            raise RegistryError(f"{component} has nothing promoted in slot {slot!r} (no promotions in {self.root}). "
                                "Fix: promote a snapshot first (evoharness promote HASH)")
        with self._locked():
            stack = _effective(self.history(component, slot))
            if not stack:
                raise RegistryError(f"{component} has nothing promoted in slot {slot!r}. "
                                    "Fix: promote a snapshot first (evoharness promote HASH)")
            current = stack[-1]
            while stack and stack[-1] == current:
                stack.pop()
            if not stack:
                raise RegistryError(f"{component}/{slot}: no earlier version to roll back to (current {current[:12]} is the first). "
                                    "Fix: promote another snapshot instead")
            snapshot = self._current(component, slot, stack[-1])  # verified before the slot moves onto it
            self._append(component, slot, Promotion(stack[-1], utc_now(), by or "manual", "rollback"))
        return snapshot


def _effective(history: Sequence[Promotion]) -> list[str]:
    """Replay the append-only log as a stack: promote pushes, rollback pops back to its target."""
    stack: list[str] = []
    for entry in history:
        if entry.action == "rollback" and stack:
            current = stack[-1]
            while stack and stack[-1] == current:
                stack.pop()
            if not stack or stack[-1] != entry.hash:  # a hand-edited log: trust the recorded target
                stack.append(entry.hash)
        else:
            stack.append(entry.hash)
    return stack
