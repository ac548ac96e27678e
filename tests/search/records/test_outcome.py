"""Claim and SearchOutcome are claim.json and summary.json: a file a search wrote reads back and
writes out byte for byte, an unknown schema version is one line, and every key they write is
documented in docs/outputs.md."""
from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.genome import Genome
from evoharness.search.records.outcome import ABSENT, Claim, Member, SearchOutcome
from evoharness.search.records.versions import VERSIONS

FIXTURES = Path(__file__).parent / "fixtures"
SUMMARIES = sorted(FIXTURES.glob("summary_*.json"))
CLAIMS = sorted(FIXTURES.glob("claim_*.json"))
DOCS = (Path(__file__).parents[3] / "docs" / "outputs.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.stem)
def test_a_written_summary_reads_back_and_writes_out_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    outcome = SearchOutcome.from_dict(json.loads(text))
    assert json.dumps(outcome.to_dict(), indent=2) + "\n" == text
    assert all(isinstance(m.genome, Genome) for m in (*outcome.front, outcome.champion, outcome.baseline))
    assert outcome.claim.verdict == json.loads(text)["claim"]["verdict"]


@pytest.mark.parametrize("path", CLAIMS, ids=lambda p: p.stem)
def test_a_written_claim_reads_back_and_writes_out_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    claim = Claim.from_dict(json.loads(text))
    assert json.dumps(claim.to_dict(), indent=2) + "\n" == text
    assert claim.rule_fields and "margin" in claim.rule_fields  # the rule's own keys survive, where they were


def test_a_member_without_a_dev_run_keeps_its_keys_apart_from_a_null_one() -> None:
    row = {"trial": 3, "round": 1, "variant_hash": "h", "genome": Genome(model=1).to_dict(), "dev": None}
    member = Member.from_dict(row)
    assert member.dev is None and member.dev_verdict is ABSENT and member.to_dict() == row


@pytest.mark.parametrize("kind, read", [("summary", SearchOutcome.from_dict), ("claim", Claim.from_dict)])
def test_an_unknown_schema_version_is_one_line(kind: str, read: Any) -> None:
    path = SUMMARIES[0] if kind == "summary" else CLAIMS[0]
    record = {**json.loads(path.read_text(encoding="utf-8")), "schema_version": 99}
    with pytest.raises(ConfigError, match=f"{kind} record version 99 is not the version {VERSIONS[kind]}") as err:
        read(record)
    assert "\n" not in str(err.value)


def _keys(value: Any, *, skip: frozenset[str]) -> set[str]:
    """Every key of the nested objects, not of the open maps (metrics, genome, params, strata...)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            if k not in skip:
                out |= _keys(v, skip=skip)
    elif isinstance(value, list):
        for v in value:
            out |= _keys(v, skip=skip)
    return out


OPEN_MAPS = frozenset({"train", "dev", "holdout", "genome", "params", "losses", "strata", "hashes", "dev_verdict"})


def test_every_key_the_records_write_is_documented() -> None:
    documented = set(re.findall(r"`([a-z_]+)`", DOCS))
    written: set[str] = set()
    for path in SUMMARIES:
        written |= _keys(SearchOutcome.from_dict(json.loads(path.read_text(encoding="utf-8"))).to_dict(), skip=OPEN_MAPS)
    for path in CLAIMS:
        written |= _keys(Claim.from_dict(json.loads(path.read_text(encoding="utf-8"))).to_dict(), skip=OPEN_MAPS)
    declared = {f.name for cls in (Member, Claim, SearchOutcome) for f in fields(cls)} - {"rule_fields"}
    assert written and declared <= written | declared
    assert sorted((written | declared) - documented) == []


def test_a_changed_verdict_is_what_the_record_says() -> None:
    outcome = SearchOutcome.from_dict(json.loads(SUMMARIES[0].read_text(encoding="utf-8")))
    changed = replace(outcome, claim=replace(outcome.claim, verdict="win"))
    assert changed.to_dict()["claim"]["verdict"] == "win" and outcome.to_dict()["claim"]["verdict"] != "win"
