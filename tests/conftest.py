"""The suite's order: the test files marked ``slow`` (whole searches, started servers) go first, the
longest of them first of all. xdist hands each worker one file at a time in collection order, so a
long file collected last keeps one worker busy while the others have nothing left to run (xdist's own
reordering by number of tests per file is off: pyproject.toml's addopts).

``LONGEST`` is the slow files by their time in a full run (`--durations`), longest first; a file
missing from it runs after them, among the slow ones. It orders the run and decides nothing else."""
from __future__ import annotations

import pytest

LONGEST = (
    "tests/search/optimise/test_budget.py", "tests/search/optimise/test_launchers.py", "tests/examples/test_tooltalk_plugin.py",
    "tests/search/optimise/test_decision.py", "tests/search/optimise/test_faults_search.py",
    "tests/search/optimise/test_search_e2e.py", "tests/search/optimise/test_interrupt.py",
    "tests/search/optimise/test_holdout_looks.py", "tests/search/optimise/test_postgres_storage.py",
    "tests/search/optimise/test_kill_resume.py", "tests/search/mutators/test_no_task_values.py",
    "tests/search/optimise/test_race.py", "tests/search/cli/test_secrets_e2e.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST)}

    def key(item: pytest.Item) -> tuple[bool, int]:
        return item.get_closest_marker("slow") is None, rank.get(item.nodeid.split("::", 1)[0], len(LONGEST))

    items.sort(key=key)  # stable: a file's tests stay in order, together
