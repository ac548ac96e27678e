from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evoharness.search.cli.report import report_main
from tests.search.records.test_report import make_summary


def test_report_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main(["demo", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: no search summary at {tmp_path / 'demo' / 'summary.json'}; run `evoharness search` with search.study=demo first"
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "summary.json").write_text("{broken", encoding="utf-8")
    assert report_main(["demo", "--runs", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    (tmp_path / "demo" / "summary.json").write_text(json.dumps(make_summary("no_win")), encoding="utf-8")
    assert report_main(["demo", "--runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(tmp_path / "demo" / "report.html") and Path(out).is_file()
    assert report_main([]) == 2


@pytest.mark.parametrize("version", [3, "1", None])
def test_report_refuses_a_summary_of_an_unknown_schema_version(tmp_path: Path, capsys: pytest.CaptureFixture[str], version: Any) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "summary.json").write_text(json.dumps({**make_summary("win"), "schema_version": version}), encoding="utf-8")
    assert report_main(["demo", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schema_version" in err and repr(version) in err
    assert not (tmp_path / "demo" / "report.html").exists()


@pytest.mark.parametrize("bad", [{"front": [1]}, {"claim": "win"}, {"objectives": "abc"}, {"champion": {"dev": 5}}])
def test_report_on_a_summary_of_the_wrong_shape_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            bad: dict[str, Any]) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "summary.json").write_text(json.dumps({**make_summary("win"), **bad}), encoding="utf-8")
    assert report_main(["demo", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "not a search summary" in err
    assert not (tmp_path / "demo" / "report.html").exists()
