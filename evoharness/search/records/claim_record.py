"""The holdout claim as the study's database holds it: a user attribute of the ``<study>/claim``
study (no trials) in the Optuna storage the search ran on, written by the finish beside
``claim.json``. Its own study: the dashboard's ``<study>/all`` is derived and rebuilt after every
round, and a record kept there would go with a rebuild that a kill cut short. A study claimed by
an earlier evoharness keeps its record on ``<study>/all``, where it is read.

``claim.json`` and ``summary.json`` are files anyone who can write the study folder can write;
``evoharness promote --if-win`` reads this record too (see ``search/cli/claim_trust.py``), so the
claim it trusts is the one the search put where its trials are.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

CLAIM_ATTR = "evoharness_claim"
RECORD_VERSION = 1


def claim_record(*, claim: Mapping[str, Any], champion: Mapping[str, Any], champion_variant: str, baseline_variant: str,
                 snapshots: Mapping[str, Any], registry: str) -> dict[str, Any]:
    """What ``--if-win`` compares with the files: the verdict, which champion (variant and snapshot)
    it is about, the freeze hashes it was made under, whether a champion.json was written, and how
    many variants the sealed holdout had been looked at for (a second look ships only with --force)."""
    return {
        "schema_version": RECORD_VERSION,
        "verdict": claim.get("verdict"),
        "champion_hash": champion_variant,
        "baseline_hash": baseline_variant,
        "snapshot": snapshots.get("champion"),
        "baseline_snapshot": snapshots.get("baseline"),
        "champion_file": snapshots.get("champion_path") is not None,
        "trial": champion.get("trial"),
        "round": champion.get("round"),
        "hashes": dict(claim.get("hashes") or {}),
        "looks": claim.get("looks"),
        "second_look": claim.get("second_look"),
        "registry": str(Path(registry).absolute()),
    }


def record_claim(storage: str, study: str, directions: Sequence[str], record: Mapping[str, Any]) -> None:
    """Store ``record`` on ``<study>/claim``."""
    import optuna

    held = optuna.create_study(storage=storage, study_name=f"{study}/claim", load_if_exists=True,
                               directions=[optuna.study.StudyDirection[d.upper()] for d in directions])
    held.set_user_attr(CLAIM_ATTR, dict(record))


class NoRecord(LookupError):
    """The storage could not be read as a study database holding this study's claim; the message says why."""


def read_only_url(url: str) -> str:
    """``url`` opened so that reading it cannot write: a SQLite file is opened read-only (and is
    never created); any other database is used as it is, with no table created in it."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return url
    path = Path(parsed.database or "").absolute()
    if not path.is_file():
        raise NoRecord(f"there is no study database at {path}")
    return f"sqlite:///file:{quote(str(path))}?mode=ro&uri=true"


def read_claim_record(url: str, study: str) -> dict[str, Any]:
    """The claim record of ``study`` in the storage at ``url``; NoRecord when it is not there."""
    import optuna
    from optuna.exceptions import OptunaError
    from sqlalchemy.exc import SQLAlchemyError

    try:
        storage = optuna.storages.RDBStorage(read_only_url(url), skip_table_creation=True)
        names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
        held = next((n for n in (f"{study}/claim", f"{study}/all") if n in names), None)  # /all: claimed before /claim
        if held is None:
            raise KeyError(study)
        record = optuna.load_study(study_name=held, storage=storage).user_attrs.get(CLAIM_ATTR)
    except KeyError:
        raise NoRecord(f"the database holds no study {study!r}") from None
    except (SQLAlchemyError, OptunaError, ValueError) as exc:  # Optuna wraps a database error in StorageInternalError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise NoRecord(f"it cannot be read as an Optuna study database ({first[:160]})") from None
    if not isinstance(record, Mapping):
        raise NoRecord(f"study {study!r} in it records no holdout claim")
    if record.get("schema_version") != RECORD_VERSION:
        raise NoRecord(f"its claim record has version {record.get('schema_version')!r}, not {RECORD_VERSION}")
    return dict(record)
