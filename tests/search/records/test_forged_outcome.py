"""summary.json and claim.json can be edited by anyone who can write the study folder: a value of
the wrong kind, a null where a record belongs or a number no search writes is one line when read
(exit 2 for `evoharness report` and `promote --if-win`), never a traceback from a reader."""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.records.format import number
from evoharness.search.records.outcome import ABSENT, SearchOutcome
from evoharness.search.records.report import render_report
from tests.search.records.test_report import make_summary


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda s: s["claim"].update(n="eight"), "Claim.n: is str 'eight', not int"),
    (lambda s: s["claim"].update(verdict=5), "Claim.verdict: is int 5, not str"),
    (lambda s: s.update(decision={"rule": "cheapest_noninferior", "margin": "abc"}), "Decision.margin: is str 'abc', not float"),
    (lambda s: s["claim"].update(n=10**400), "SearchOutcome.claim: holds the number int 1000"),
    (lambda s: s["claim"].update(mean_diff=-1e308), "SearchOutcome.claim: holds the number float -1e+308"),
    (lambda s: s.update(front={"a": 1}), "SearchOutcome.front: is dict"),
    (lambda s: s["claim"].update(confidence=float("inf")), "SearchOutcome.claim: holds the number float inf"),
    (lambda s: s["champion"].update(genome={"steps": None}), "Member.genome: is not a genome"),
    (lambda s: s["champion"].update(genome={"toolset": "x"}), "Member.genome: is not a genome"),
])
def test_a_forged_value_is_one_line_naming_it(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    summary = copy.deepcopy(make_summary("win"))
    mutate(summary)
    with pytest.raises(ConfigError) as caught:
        SearchOutcome.from_dict(summary)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_null_record_reads_as_absent_and_every_reader_copes() -> None:
    summary = copy.deepcopy(make_summary("win"))
    summary.update(snapshots=None, champion=None)
    outcome = SearchOutcome.from_dict(summary)
    assert outcome.snapshots is ABSENT and not outcome.snapshots.champion  # a chain through a null stays absent
    assert "<!DOCTYPE html>" in render_report(summary)


@pytest.mark.parametrize("value", [10**400, -1e308, float("inf"), float("nan"), True, "1"])
def test_a_number_no_one_can_read_is_shown_as_missing(value: Any) -> None:
    assert number(value) is None
