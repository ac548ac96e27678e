"""The suite's order names real files: a renamed slow file would fall back to collection order and
might again end the run alone on one worker."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST

ROOT = Path(__file__).resolve().parents[1]


def test_every_longest_file_exists_and_is_marked_slow() -> None:
    for name in LONGEST:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "pytestmark = pytest.mark.slow" in text, name
    assert len(set(LONGEST)) == len(LONGEST)
