"""Which holdout claim ``evoharness promote --if-win`` trusts.

A search leaves ``claim.json``, ``summary.json``, ``freeze.json`` and ``champion.json`` in
``runs/<study>/``. Anyone who can write that folder can write all four: files that agree with each
other prove only that they were written to agree. So ``--if-win`` also asks the two places the
search itself writes to, the study's database and the registry, and ships a champion only when
every record agrees:

1. **The study's database.** When it writes ``claim.json``, the finish also stores the claim
   (verdict, champion variant, champion snapshot, the freeze hashes) as a user attribute of the
   ``<study>/all`` study, in the Optuna storage the trials are in
   (``search/records/claim_record.py``). ``--if-win`` opens that storage read-only: the storage
   URL that ``summary.json`` records, or the study folder's own ``study.db`` when the search used
   the default (the folder may have moved since). The database must hold this study, and its
   claim must name this snapshot and agree with ``claim.json``, ``summary.json`` and
   ``freeze.json`` field by field. An edited verdict, a database of another study, or one whose
   claim names another champion is refused.
2. **The freeze record.** The claim's hashes (config, workload, splits, scorer) are the ones
   ``freeze.json`` pins, so the claim is tied to the study it was made in.
3. **The registry.** The search stores every snapshot it makes, the champion included, in its
   registry before it writes ``champion.json``. The snapshot must already be in the registry
   being promoted into. A definition that never entered the operator's registry (a handed-over
   ``champion.json`` with its own claim files) is refused whatever the files and the database say.
   The registry keeps the first record of a definition, so a stored snapshot's provenance can name
   another study that reached the same definition. That is why the registry is asked only whether
   it holds the definition, and the database is asked which study claimed it.

What this does not protect against: someone who can write both the study's database (a SQLite
``study.db`` is a file in the folder) and the files, with records that match, for a definition
already in the registry (a round winner or a losing champion the operator's own searches
stored). Nor does it protect against someone who can write the registry itself. Records that
match are not a signature. What remains is that such a person can promote only a definition the
operator's own tools have stored. A signature would need a key the operator keeps outside both
folders. Without one, the registry is the record an outsider's folder cannot reach.

A win claimed on a second (or later) look at the sealed holdout (the database's record says so:
``second_look``, or ``looks`` above 1 in a record written before that key) is refused unless the
operator passes ``--force``; ``claim.json`` and ``summary.json`` must agree with the record's look
count, so a file edited to hide the second look from the report is refused too.

Every refusal is one RegistryError line (exit 2). A study whose records agree that its verdict is
not a win is not an error: ``--if-win`` then promotes nothing and exits 0.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import is_name
from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import RegistryError, Snapshot, read_snapshot
from evoharness.compiler.secrets import public_url
from evoharness.search.records.claim_record import NoRecord, read_claim_record
from evoharness.search.records.outcome import ABSENT, Claim, SearchOutcome
from evoharness.search.records.versions import checked

T = TypeVar("T")

_REVIEW = "or review the snapshot and promote it without --if-win"


@dataclass(frozen=True)
class StudyRecords:
    """One study's records, checked against each other and against its database."""

    folder: Path
    study: str
    claim: Claim
    summary: SearchOutcome
    record: Mapping[str, Any]  # the claim as the study's database holds it

    @property
    def verdict(self) -> str:
        return str(self.record.get("verdict"))

    @property
    def champion_snapshot(self) -> str:
        return str(self.record.get("snapshot"))

    @property
    def looks(self) -> int | None:
        looks = self.record.get("looks")
        return looks if type(looks) is int else None

    @property
    def second_look(self) -> bool:
        """Whether the database records the claim as a second (or later) look at its sealed holdout
        (a record written before ``second_look`` was kept says so by its look count)."""
        flag = self.record.get("second_look")
        return flag if isinstance(flag, bool) else (self.looks or 0) > 1


def study_folder(ref: str, snapshot: Snapshot | None, runs: str | None) -> Path:
    """The study folder whose records back ``ref``: the folder of a path given inside a study folder
    (runs/<study>/champion.json), else ``<runs>/<study the snapshot names>`` (runs: --runs or runs/)."""
    path = Path(ref)
    if runs is None and path.suffix == ".json" and (path.parent / "summary.json").is_file():
        return path.parent
    study = snapshot.provenance.get("study") if snapshot is not None else None
    if not is_name(study):
        short = snapshot.content_hash[:12] if snapshot is not None else ref
        raise RegistryError(f"snapshot {short} names no study ({study!r}), so no claim backs it. "
                            f"Fix: promote a search's runs/<study>/champion.json, {_REVIEW}")
    return Path(runs or "runs") / str(study)


def _read(folder: Path, name: str, kind: str) -> dict[str, Any]:
    path = folder / name
    try:
        return checked(kind, json.loads(path.read_text(encoding="utf-8")), path)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested deeper than a parser goes
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0][:200]
        raise RegistryError(f"no readable {name} for study {folder.name!r} in {folder} ({why}). "
                            f"Fix: pass the study's own runs/<study>/champion.json (or --runs with the output root the search wrote to), "
                            f"{_REVIEW}") from None


def _typed(folder: Path, name: str, record: Mapping[str, Any], read: Callable[[Mapping[str, Any]], T]) -> T:
    try:
        return read(record)
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise RegistryError(f"{folder / name} is not the record a search writes ({why}). "
                            f"Fix: re-run the search to rewrite its records, {_REVIEW}") from None


def _storage_url(folder: Path, study: str, recorded: str, given: str | None) -> str:
    """The URL to read the study's database from: the folder's own study.db for a study on the default
    storage (the folder may have been moved since), else only the URL the operator passes. Never one
    a file names: whoever writes summary.json would choose the database that vouches for it, and a
    host that receives the operator's database password."""
    from sqlalchemy.engine import make_url

    if given is not None:
        if public_url(given) != recorded:
            raise RegistryError(f"--storage {public_url(given)} is not the storage study {study!r} ran on ({recorded}). "
                                "Fix: pass the URL its summary.json names, with the password")
        return given
    try:
        parsed = make_url(recorded)
    except Exception:  # SQLAlchemy raises several types for a malformed URL; each is the same refusal
        raise RegistryError(f"study {study!r} records storage {recorded!r}, which is not a database URL. "
                            f"Fix: re-run the search to rewrite its records, {_REVIEW}") from None
    if parsed.get_backend_name() == "sqlite" and parsed.password is None:
        db = Path(parsed.database or "")
        if db.name == "study.db" and db.parent.name == study:
            return f"sqlite:///{(folder / 'study.db').absolute()}"
    raise RegistryError(f"study {study!r} ran on {recorded}, not on its folder's own study.db, and promote reads a database "
                        "only at the operator's word. Fix: pass --storage with the study's URL (e.g. --storage \"$STUDY_DB_URL\")")


def _same(study: str, what: str, where: str, found: Any, recorded: Any) -> None:
    if found != recorded:
        raise RegistryError(f"study {study!r}: {what} in {where} ({str(found)[:80]}) is not what the study's database records "
                            f"({str(recorded)[:80]}): the file was edited or comes from another run. "
                            f"Fix: re-run the search to rewrite its records, {_REVIEW}")


def study_records(folder: Path, *, storage: str | None = None) -> StudyRecords:
    """The study's claim, read from its files and its database, which must agree."""
    from evoharness.search.optimise.finish import Frozen

    study = folder.name
    if not is_name(study):
        raise RegistryError(f"{folder} is not a study folder (its name is not a study name). "
                            f"Fix: pass runs/<study>/champion.json, {_REVIEW}")
    claim = _typed(folder, "claim.json", _read(folder, "claim.json", "claim"), Claim.from_dict)
    summary = _typed(folder, "summary.json", _read(folder, "summary.json", "summary"), SearchOutcome.from_dict)
    freeze = _read(folder, "freeze.json", "freeze")
    if summary.study != study:
        raise RegistryError(f"{folder}/summary.json is study {summary.study!r}'s, not {study!r}'s: the folder was assembled "
                            f"from another study's files. Fix: re-run the search, {_REVIEW}")
    recorded = str(summary.storage or "")
    if not recorded:
        raise RegistryError(f"study {study!r}: summary.json names no storage. Fix: re-run the search to rewrite its records, {_REVIEW}")
    url = _storage_url(folder, study, recorded, storage)
    try:
        record = read_claim_record(url, study)
    except NoRecord as why:
        raise RegistryError(f"study {study!r}: its claim is not in the study's database {public_url(url)} ({why}), so nothing "
                            f"the search wrote backs claim.json. Fix: re-run the search (the same command resumes the study "
                            f"and records its claim), {_REVIEW}") from None
    try:
        pinned = Frozen.from_dict(freeze).hashes()
    except (KeyError, TypeError, ValueError):
        raise RegistryError(f"study {study!r}: freeze.json is not a freeze record. Fix: re-run the search, {_REVIEW}") from None
    snapshots = summary.snapshots
    _same(study, "the verdict", "claim.json", claim.verdict, record.get("verdict"))
    _same(study, "the champion's variant", "claim.json", claim.champion_hash, record.get("champion_hash"))
    _same(study, "the champion's variant", "summary.json", summary.champion.variant_hash, record.get("champion_hash"))
    _same(study, "the claim's verdict", "summary.json", summary.claim.verdict, record.get("verdict"))
    _same(study, "the champion snapshot", "summary.json", snapshots.champion, record.get("snapshot"))
    _same(study, "whether a champion.json was written", "summary.json", snapshots.champion_path is not None,
          record.get("champion_file"))
    _same(study, "the claim's hashes", "claim.json", claim.hashes, record.get("hashes"))
    _same(study, "the hashes", "freeze.json", pinned, record.get("hashes"))
    if "looks" in record:  # a file edited to hide a second look (the report and the summary read them)
        _same(study, "the holdout looks", "claim.json", _given(claim.looks), record.get("looks"))
        _same(study, "the holdout looks", "summary.json", _given(summary.claim.looks), record.get("looks"))
    if "second_look" in record:
        _same(study, "whether the claim is a second look", "claim.json", _given(claim.second_look), record.get("second_look"))
        _same(study, "whether the claim is a second look", "summary.json", _given(summary.claim.second_look), record.get("second_look"))
    return StudyRecords(folder=folder, study=study, claim=claim, summary=summary, record=record)


def _given(value: Any) -> Any:
    return None if value is ABSENT else value


def second_look_refusal(snapshot: Snapshot, records: StudyRecords) -> str:
    """The line ``--if-win`` refuses a second-look win with (without ``--force``)."""
    looks = f" (look {records.looks}: the split had been looked at for {records.looks} variants)" if records.looks else ""
    return (f"snapshot {snapshot.content_hash[:12]}: study {records.study!r} records its win as a second look at the sealed holdout"
            f"{looks}, so its interval overstates it. "
            "Fix: confirm it on a holdout not looked at yet, or pass --force to ship it anyway")


def trusted_verdict(snapshot: Snapshot, records: StudyRecords, registry: Registry) -> str:
    """The study's verdict for ``snapshot``, once the database names it as the champion and the
    registry holds it; otherwise a one-line RegistryError."""
    short, study = snapshot.content_hash[:12], records.study
    if snapshot.content_hash != records.champion_snapshot:
        raise RegistryError(f"snapshot {short} is not the champion of study {study!r} (its database records "
                            f"{records.champion_snapshot[:12]}), so the study's claim does not cover it. "
                            f"Fix: promote the study's own champion.json, {_REVIEW}")
    stored = registry.path_of(snapshot.content_hash)
    if not stored.is_file():
        searched = str(records.record.get("registry") or "")
        hint = (f"pass --registry {searched} (where the search stored it)" if searched and Path(searched) != registry.root.absolute()
                else "promote the champion of a search that ran against this registry")
        raise RegistryError(f"snapshot {short} is not in registry {registry.root}: the search stores its champion there before "
                            f"writing champion.json, so this one did not come from a search of this registry. Fix: {hint}, {_REVIEW}")
    read_snapshot(stored)  # a stored copy that no longer hashes to its name is refused by name
    return records.verdict


def nothing_to_promote(path: Path, *, storage: str | None = None) -> str:
    """For an ``--if-win`` path that does not exist: the line to print when it is the champion.json of
    a study whose records agree it made no champion (the incumbent stayed); else a RegistryError."""
    folder = path.parent
    if path.name != "champion.json" or not (folder / "summary.json").is_file():
        raise RegistryError(f"no snapshot file {path}. Fix: check the path (a search writes runs/<study>/champion.json), "
                            "or give a full hash or a unique prefix")
    records = study_records(folder, storage=storage)
    if records.record.get("champion_file"):
        raise RegistryError(f"{path} is missing, but study {records.study!r} chose champion {records.champion_snapshot[:12]} and "
                            f"wrote it there. Fix: re-run the search to rewrite it, or promote {records.champion_snapshot[:12]} "
                            "from the registry with --if-win")
    return f"nothing promoted: study {records.study!r} kept its incumbent, so it wrote no champion.json"
