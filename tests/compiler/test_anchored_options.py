"""A relative file in a workload's options is read from the folder of the config file that names
it; a value no config file sets (a command-line override) from the working folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.compiler.configpath import anchored_options
from evoharness.compiler.errors import ConfigError


def config_dir(root: Path, name: str, path: str) -> Path:
    (root / "workload").mkdir(parents=True)
    (root / "workload" / f"{name}.yaml").write_text(f"name: tasks\noptions:\n  path: {path}\n"
                                                    "  tool_outputs: {path: snaps/t.json, mode: replay}\n", encoding="utf-8")
    return root


def test_a_path_a_config_file_names_is_read_from_that_files_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config_dir(tmp_path / "cfg", "desk", "data/tasks.jsonl")
    monkeypatch.chdir(tmp_path)
    got = anchored_options({"path": "data/tasks.jsonl", "tools": ["m.f"], "tool_outputs": {"path": "snaps/t.json", "mode": "replay"}},
                           [cfg])
    assert got["path"] == str(cfg / "workload" / "data" / "tasks.jsonl") and got["tools"] == ["m.f"]
    assert got["tool_outputs"]["path"] == str(cfg / "workload" / "snaps" / "t.json")


def test_an_override_no_file_names_is_read_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config_dir(tmp_path / "cfg", "desk", "data/tasks.jsonl")
    monkeypatch.chdir(tmp_path)
    assert anchored_options({"path": "mine.jsonl"}, [cfg]) == {"path": str(tmp_path / "mine.jsonl")}
    assert anchored_options({"path": "/abs/t.jsonl"}, [cfg]) == {"path": "/abs/t.jsonl"}


def test_one_relative_text_in_two_folders_is_refused_unless_one_file_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = config_dir(tmp_path / "one", "a", "t.jsonl"), config_dir(tmp_path / "two", "b", "t.jsonl")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="workload.options.path: 't.jsonl' is set by several config files"):
        anchored_options({"path": "t.jsonl"}, [one, two])
    (two / "workload" / "t.jsonl").write_text("", encoding="utf-8")
    assert anchored_options({"path": "t.jsonl"}, [one, two])["path"] == str(two / "workload" / "t.jsonl")


def test_hashes_see_file_options_by_name_wherever_the_checkout_lives() -> None:
    from evoharness.compiler.configpath import portable_options

    here = {"path": "/home/u/proj/data/tasks.jsonl", "tool_outputs": {"path": "/home/u/proj/out.json", "mode": "replay"}, "n": 1}
    there = {"path": "/srv/clone/data/tasks.jsonl", "tool_outputs": {"path": "/srv/clone/out.json", "mode": "replay"}, "n": 1}
    assert portable_options(here) == portable_options(there) != portable_options({**there, "path": "/srv/clone/other.jsonl"})
    assert here["path"].startswith("/home/u")  # the options the job reads keep their absolute paths
