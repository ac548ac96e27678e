"""`evoharness cache`: it counts and removes cache entries and nothing else, and a clear without
--yes removes nothing."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from evoharness.compiler.runtime.cache import ResponseCache
from evoharness.search.cli.main import main

KEY = "ab" + "0" * 62


def filled(root: Path) -> list[Path]:
    cache = ResponseCache(root)
    cache.put(KEY, {"content": "hi", "tool_calls": [], "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop",
                    "cost_usd": 0.0, "latency_s": 0.1})
    cache.put_episode("cd" + "1" * 62, {"version": 1})
    old = root / "ef" / ("ef" + "2" * 62 + ".json")
    old.parent.mkdir()
    old.write_text("{}")
    os.utime(old, (time.time() - 3 * 86400,) * 2)
    # not entries: a note, a misnamed file, an entry in the wrong shard, a link out of the folder
    (root / "notes.txt").write_text("mine")
    (root / "ab" / "readme.json").write_text("{}")
    (root / "ab" / ("cd" + "3" * 62 + ".json")).write_text("{}")
    outside = root.parent / "outside.json"
    outside.write_text("{}")
    (root / "ab" / ("ab" + "4" * 62 + ".json")).symlink_to(outside)
    return [root / "notes.txt", root / "ab" / "readme.json", root / "ab" / ("cd" + "3" * 62 + ".json"), outside]


def test_stats_then_clear_old_then_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cache"
    keep = filled(root)
    assert main(["cache", "stats", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("replies: 2 entries") and "episodes: 1 entries" in out
    assert main(["cache", "clear", "--dir", str(root)]) == 0
    assert "would remove 3 entries" in capsys.readouterr().out and len(list(ResponseCache(root).entries())) == 3
    assert main(["cache", "clear", "--dir", str(root), "--older-than", "1", "--yes"]) == 0
    assert "removed 1 entries older than 1 days" in capsys.readouterr().out
    assert [p.name[:2] for _, p in ResponseCache(root).entries()] == ["ab", "cd"]
    assert main(["cache", "clear", "--dir", str(root), "--yes"]) == 0
    assert list(ResponseCache(root).entries()) == [] and all(p.exists() for p in keep)  # nothing but entries went


@pytest.mark.parametrize("args, message", [(["--older-than", "-1"], "is not a number of days"),
                                           (["--older-than", "nan"], "is not a number of days"),
                                           (["--dir", "redis://:pw@host:6379/0"], "is a shared cache on a server")])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["cache", "clear", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "pw@" not in err
