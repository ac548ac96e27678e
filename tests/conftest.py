"""The suite's order: the test files marked ``slow`` (whole searches, started servers) go first. xdist
hands each worker one file at a time in collection order, so a long file collected last keeps one
worker busy while the other has nothing left to run."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: a file's tests stay in order, together
