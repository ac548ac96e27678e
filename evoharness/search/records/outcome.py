"""What a finished search leaves, typed: ``Claim`` is claim.json and ``SearchOutcome`` is
summary.json. ``to_dict`` writes exactly the keys (and key order) of those files and
``from_dict`` reads them back; docs/outputs.md documents every key.

A key a record may lack (a front member that got no dev run has no ``dev_verdict``; only the
champion has ``holdout``) is ``ABSENT`` on the object and left out of ``to_dict``, so a file read
and written again is the same file. ``from_dict`` refuses a schema version this code does not
write, with one line.
"""
from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from evoharness.compiler.errors import ConfigError
from evoharness.search.genome import Genome
from evoharness.search.records.field_check import FIX as _FIX
from evoharness.search.records.field_check import check as _check
from evoharness.search.records.field_check import is_record as _is_record
from evoharness.search.records.versions import ALSO_READ, VERSIONS


class _Absent:
    """A key the record lacks. Falsy, and any field of it is absent too, so a reader of a partial
    record (an older or hand-made one) asks ``present(x, default)`` once instead of at every level."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __str__(self) -> str:  # how a message names it: the file has no such value
        return "absent"

    def __bool__(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self


ABSENT: Any = _Absent()  # a key the record does not have (not the same as a key whose value is null)

R = TypeVar("R")
D = TypeVar("D")


def present(value: Any, default: D) -> Any:
    """``value``, or ``default`` when the record lacks it or holds null."""
    return default if value is ABSENT or value is None else value


def as_dict(record: Any) -> dict[str, Any]:
    """A record's ``to_dict()``; {} for an absent one."""
    return record.to_dict() if record else {}


def _version(kind: str, d: Mapping[str, Any]) -> int:
    found = d.get("schema_version", 1)  # a record from before versioning is version 1
    if type(found) is not int or (found != VERSIONS[kind] and found not in ALSO_READ.get(kind, ())):
        raise ConfigError(f"{kind}.schema_version", f"{kind} record version {found!r} is not the version {VERSIONS[kind]} "
                          "this evoharness reads", "use the evoharness version that wrote it, or re-run to rewrite the record")
    return found


def _emit(obj: Any) -> dict[str, Any]:
    """The fields in declared order, ABSENT ones left out; nested records written by their own to_dict."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is ABSENT or f.metadata.get("skip"):
            continue
        if hasattr(value, "to_dict"):
            value = value.to_dict()
        elif isinstance(value, tuple) and value and hasattr(value[0], "to_dict"):
            value = [v.to_dict() for v in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _take(cls: type[R], d: Mapping[str, Any], **convert: Any) -> R:
    """``cls`` from ``d``: each field's key (converted by ``convert[name]`` when given), ABSENT when
    missing. A value of the wrong kind for its field (text for a number, null for a record, a number
    no float holds) is refused with one line naming it: these files can be edited by hand."""
    if not isinstance(d, Mapping):
        raise ConfigError(cls.__name__, f"is a {type(d).__name__}, not a record (a JSON object)", _FIX)
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"{cls.__name__}", f"unknown keys {unknown}", "the record was written by another evoharness version")
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in d:
            value = d[f.name]
            if value is None and _is_record(hints[f.name]):
                kw[f.name] = ABSENT  # a nested record that is null reads as absent, so no reader follows a null
                continue
            if value is not None:  # null is any field's "not measured", which every reader shows as missing
                _check(f"{cls.__name__}.{f.name}", value, hints[f.name])
            kw[f.name] = convert[f.name](value) if f.name in convert and value is not None else value
        elif f.default is MISSING and f.default_factory is MISSING:
            kw[f.name] = ABSENT
    return cls(**kw)


def _genome(d: Mapping[str, Any]) -> Genome:
    """A member's genome, or one line saying the record's is not one a search writes."""
    try:
        return Genome.from_dict(d)
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ConfigError("Member.genome", f"is not a genome ({type(exc).__name__}: {str(exc)[:80]})", _FIX) from None


@dataclass(frozen=True)
class Member:
    """A variant as summary.json lists it: the baseline, the named reference, a front member or
    the champion. Which keys it has depends on what it is (see docs/outputs.md)."""

    name: str = ABSENT  # the reference's model name
    trial: int | str = ABSENT
    round: int = ABSENT
    variant_hash: str = ABSENT
    genome: Genome = ABSENT
    authors: Sequence[str] = ABSENT
    changes: str = ABSENT
    edits: Sequence[Mapping[str, Any]] = ABSENT
    params: Mapping[str, Any] = ABSENT
    values: Sequence[float] = ABSENT
    train: Mapping[str, float] = ABSENT
    dev: Mapping[str, float] | None = ABSENT
    diff: str = ABSENT
    champion: bool = ABSENT
    losses: Mapping[str, int] = ABSENT
    dev_verdict: Mapping[str, Any] = ABSENT
    dev_vs_reference: Mapping[str, float] | None = ABSENT
    dev_skipped: str = ABSENT  # a front member with no dev run: why, in a few words
    holdout: Mapping[str, float] = ABSENT
    dashboard_trial: int = ABSENT  # its trial number in the study's <study>/all view (optuna-dashboard)
    transcripts: Mapping[str, Any] = ABSENT  # {page, split, failed}: its episodes beside the incumbent's

    def to_dict(self) -> dict[str, Any]:
        return _emit(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Member:
        return _take(cls, d, genome=_genome, authors=list, edits=list, values=list)


@dataclass(frozen=True)
class Claim:
    """claim.json: the holdout verdict, the test it came from and what it was made under.
    ``rule_fields`` are the decision rule's own keys (a non-inferiority rule's margin and saving)."""

    verdict: str
    metric: str
    test: str
    decision: str
    mean_diff: float
    low: float
    high: float
    p_value: float
    alpha: float
    n: int
    discordant: int
    min_discordant: int
    confidence: float
    min_effect: float
    resamples: int
    baseline_hash: str
    champion_hash: str
    pass_rate_delta: float
    cost_delta: float
    latency_delta: float
    tasks: Sequence[str]
    hashes: Mapping[str, str]
    note: str
    looks: int = ABSENT
    second_look: bool = ABSENT
    reference: str = ABSENT
    unit: str = ABSENT
    clusters: int = ABSENT
    design_effect: float = ABSENT
    reach: float = ABSENT
    underpowered: bool = ABSENT
    rule_fields: Mapping[str, Any] = field(default_factory=dict, metadata={"skip": True})
    schema_version: int = field(default=VERSIONS["claim"], metadata={"skip": True})

    def to_dict(self) -> dict[str, Any]:
        body = _emit(self)
        head: dict[str, Any] = {k: body.pop(k) for k in ("verdict", "metric", "test", "decision") if k in body}
        return {"schema_version": self.schema_version, **head, **self.rule_fields, **body}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        version = _version("claim", d)
        names = {f.name for f in fields(cls)}
        own = {k: v for k, v in d.items() if k in names and k not in ("schema_version", "rule_fields")}
        rule_fields = {k: v for k, v in d.items() if k not in names}
        claim = _take(cls, own, tasks=list)
        return _replace(claim, rule_fields=rule_fields, schema_version=version)


def _replace(obj: R, **changes: Any) -> R:
    from dataclasses import replace

    return replace(obj, **changes)  # type: ignore[type-var]


@dataclass(frozen=True)
class Decision:
    """summary.decision: the rule, what it compared with, and the evidence the pick stood on."""

    rule: str
    margin: float = ABSENT
    reference: str = ABSENT
    reference_quality: float = ABSENT
    evidence: str = ABSENT

    def to_dict(self) -> dict[str, Any]:
        return _emit(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Decision:
        return _take(cls, d)


@dataclass(frozen=True)
class Snapshots:
    """summary.snapshots: the registry hashes the search stored, and champion.json's path (None when the incumbent stayed)."""

    baseline: str
    rounds: Sequence[str]
    champion: str
    champion_path: str | None

    def to_dict(self) -> dict[str, Any]:
        return _emit(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshots:
        return _take(cls, d, rounds=list)


@dataclass(frozen=True)
class Paths:
    ledger: str
    claim: str
    optimization_results: str
    report: str

    def to_dict(self) -> dict[str, Any]:
        return _emit(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Paths:
        return _take(cls, d)


@dataclass(frozen=True)
class Splits:
    hash: str
    strata: Mapping[str, Mapping[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return _emit(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Splits:
        return _take(cls, d)


@dataclass(frozen=True)
class SearchOutcome:
    """summary.json: the study's answer (champion, decision, claim) and the evidence behind it."""

    study: str
    created_at: str
    storage: str
    objectives: Sequence[Mapping[str, str]]
    baseline: Member
    trials: Sequence[Mapping[str, Any]]
    front: Sequence[Member]
    champion: Member
    decision: Decision
    claim: Claim
    snapshots: Snapshots
    ablation: Sequence[Mapping[str, Any]]
    reference: Member = ABSENT
    splits: Splits = ABSENT
    spend: Mapping[str, Any] = ABSENT
    paths: Paths = ABSENT
    headline: str = ABSENT
    live_tools: Sequence[str] = ABSENT  # tools that ran live in the search (search.live_ok=true); absent when none did
    doctor: Mapping[str, Any] = ABSENT  # `evoharness doctor`'s verdict on the workload and harness searched
    schema_version: int = field(default=VERSIONS["summary"], metadata={"skip": True})

    def to_dict(self) -> dict[str, Any]:
        body = _emit(self)
        body["front"] = [m.to_dict() for m in self.front]  # an empty front is a list too
        return {"schema_version": self.schema_version, **body}

    @classmethod
    def of(cls, summary: SearchOutcome | Mapping[str, Any]) -> SearchOutcome:
        """``summary`` as a SearchOutcome (a mapping is read by from_dict)."""
        return summary if isinstance(summary, SearchOutcome) else cls.from_dict(summary)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchOutcome:
        version = _version("summary", d)
        body = {k: v for k, v in d.items() if k != "schema_version"}
        outcome = _take(cls, body, baseline=Member.from_dict, front=lambda xs: tuple(Member.from_dict(m) for m in xs),
                        champion=Member.from_dict, decision=Decision.from_dict, claim=Claim.from_dict,
                        snapshots=Snapshots.from_dict, reference=Member.from_dict, splits=Splits.from_dict,
                        paths=Paths.from_dict, objectives=list, trials=list, ablation=list, live_tools=list)
        return _replace(outcome, schema_version=version)

    @property
    def kept_incumbent(self) -> bool:
        """Whether the champion is the incumbent itself (no candidate was claimed)."""
        return self.champion.variant_hash == self.baseline.variant_hash
