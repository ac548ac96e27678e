"""What a record says about the workload that judged it: the scorer hash covers the benchmark code
the workload names (``scorer_modules``), and the versions are those of the packages it declares."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from evoharness.search.evaluation.scorer import scorer_hash
from evoharness.search.records.provenance import provenance


@pytest.fixture()
def benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed-looking benchmark package with a checker module, and an adapter module using it."""
    pkg = tmp_path / "toy_bench" / "checker"
    pkg.mkdir(parents=True)
    (tmp_path / "toy_bench" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "rules.py").write_text("THRESHOLD = 0.5\n", encoding="utf-8")
    (tmp_path / "toy_adapter.py").write_text(
        "class ToyWorkload:\n    name = 'toy'\n    packages = ('pytest',)\n    scorer_modules = ('toy_bench.checker',)\n"
        "    def score(self, task, trajectory, environment):\n        return None\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith(("toy_bench", "toy_adapter"))]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


def test_the_scorer_hash_changes_with_the_benchmark_code_it_names(benchmark: Path) -> None:
    workload = importlib.import_module("toy_adapter").ToyWorkload()
    before = scorer_hash(workload)
    assert scorer_hash(workload) == before
    (benchmark / "toy_bench" / "checker" / "rules.py").write_text("THRESHOLD = 0.6\n", encoding="utf-8")
    assert scorer_hash(workload) != before  # a changed benchmark checker is a changed scorer
    workload.scorer_settings = {"text_match": "lexical"}
    lexical = scorer_hash(workload)
    workload.scorer_settings = {"text_match": "distilbert"}
    assert len({lexical, scorer_hash(workload)}) == 2  # another matcher judged: another scorer
    workload.scorer_modules = ("toy_bench.nope",)
    with pytest.raises(ValueError, match="scorer module 'toy_bench.nope' cannot be found"):
        scorer_hash(workload)


def test_records_version_the_packages_a_workload_declares() -> None:
    p = provenance({}, [], packages=("pytest", "no-such-dist-xyz"))
    assert p["versions"]["pytest"] == pytest.__version__ and p["versions"]["no-such-dist-xyz"] == "absent"
    assert "bfcl-eval" not in provenance({}, [])["versions"]  # only a workload that declares it names it
