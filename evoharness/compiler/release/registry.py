"""Registry: a store of content-addressed agent snapshots, and promotion slots with history.

Layout under the root (default ``runs/registry/``)::

    snapshots/<sha256>.json  one Snapshot each, never rewritten; named by the hash of its definition
    promotions.json          {component: {slot: [{hash, promoted_at, by, action}, ...]}}; current = last
    .lock                    flock'ed around every write, so concurrent promoters never lose an update
    holdout_looks.jsonl      the looks at sealed holdouts by every search and `evaluate` on this registry
                             (written by evoharness.search.records.looks, under holdout_looks.jsonl.lock)

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.names import is_name
from evoharness.compiler.release.snapshot import RegistryError, Snapshot, check_snapshot, is_digest, read_snapshot, utc_now

DEFAULT_ROOT = "runs/registry"
DEFAULT_SLOT = "default"
MIN_PREFIX = 6
_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Promotion:
    hash: str
    promoted_at: str
    by: str
    action: str = "promote"  # promote | rollback


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
        matches = (sorted(p for p in self.snapshot_dir.glob(f"{digest}*.json") if is_digest(p.stem))
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
            if not is_digest(path.stem):
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
