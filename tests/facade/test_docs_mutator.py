"""The mutator plugin docs/workloads.md shows is real code: run from the page, it registers and
passes evoharness.testing's MutatorContract."""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from evoharness.search.mutators.base import make_mutator
from evoharness.testing import MutatorContract, order_desk_case

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs/workloads.md").read_text(encoding="utf-8"), flags=re.S | re.M)
[PLUGIN] = [b for b in BLOCKS if "@register_mutator(" in b]
exec(compile(PLUGIN, "docs/workloads.md (the mutator plugin)", "exec"), {"__name__": "docs_mutator"})  # registers check_values


class TestTheDocsMutator(MutatorContract):
    mutator = "check_values"


def test_it_refuses_an_empty_sentence_and_proposes_once() -> None:
    with pytest.raises(ValueError, match="params.sentence"):
        make_mutator("check_values", sentence=" ")
    case = order_desk_case()
    mutator = make_mutator("check_values")
    [proposal] = mutator.propose(case.context, rng=random.Random(0))
    assert proposal.key == "policy" and proposal.entry.value.endswith(mutator.sentence)
