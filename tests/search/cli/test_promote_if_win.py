"""`promote --if-win` trusts only the study's own claim: a snapshot's provenance is not covered by
its content hash, so a forged snapshot that says `win` is refused, and a real champion is promoted
only when its study's claim.json says win."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.atomic import write_text_atomic
from compiler.release.registry import Registry, make_snapshot
from search.cli.registry import promote_main
from tests.compiler.fixtures import configs


def snapshot(role: str, verdict: str, *, study: str = "s1", tweak: str = "") -> Any:
    agent, _, model = configs()
    agent = {**agent, "prompt_sections": {**agent["prompt_sections"], "role": agent["prompt_sections"]["role"] + tweak}}
    return make_snapshot(agent["name"], {"agent": agent, "tool_overrides": {}, "model": model}, author="nsga2",
                         provenance={"study": study, "role": role, "variant_hash": "v" * 64, "claim": {"verdict": verdict}})


def study(runs: Path, champion: Any, verdict: str, name: str = "s1") -> Path:
    folder = runs / name
    folder.mkdir(parents=True)
    (folder / "claim.json").write_text(json.dumps({"schema_version": 1, "verdict": verdict, "champion_hash": "v" * 64}))
    (folder / "summary.json").write_text(json.dumps({"schema_version": 1, "snapshots": {"champion": champion.content_hash},
                                                     "champion": {"variant_hash": "v" * 64}}))
    path = folder / "champion.json"
    write_text_atomic(path, json.dumps(champion.to_dict(), indent=1, ensure_ascii=False) + "\n")
    return path


def promote(tmp: Path, ref: Path | str, *extra: str) -> int:
    return promote_main([str(ref), "--if-win", "--registry", str(tmp / "registry"), *extra])


def test_the_studys_champion_with_a_win_is_promoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    champ = snapshot("champion", "win")
    path = study(tmp_path / "runs", champ, "win")
    assert promote(tmp_path, path) == 0
    assert capsys.readouterr().out.split()[-1] == champ.content_hash
    assert Registry(str(tmp_path / "registry")).promoted(champ.component, "default").content_hash == champ.content_hash


def test_the_studys_own_verdict_wins_over_what_the_snapshot_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    champ = snapshot("champion", "win")  # its provenance says win
    path = study(tmp_path / "runs", champ, "no_win")  # the study's claim does not
    assert promote(tmp_path, path) == 0
    assert "the study's holdout verdict is 'no_win'" in capsys.readouterr().out
    assert Registry(str(tmp_path / "registry")).promoted(champ.component, "default") is None


def test_a_forged_snapshot_claiming_a_win_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = snapshot("champion", "win")
    study(tmp_path / "runs", real, "win")
    forged = snapshot("champion", "win", tweak=" {{ payload }}")
    fake = tmp_path / "runs" / "s1" / "forged.json"
    write_text_atomic(fake, json.dumps(forged.to_dict(), indent=1, ensure_ascii=False) + "\n")
    assert promote(tmp_path, fake) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"snapshot {forged.content_hash[:12]} is not the champion of study 's1'" in err
    assert Registry(str(tmp_path / "registry")).promoted(forged.component, "default") is None


@pytest.mark.parametrize("study_name, expected", [(None, "names no study"), ("../etc", "names no study"), ("gone", "no readable claim")])
def test_a_snapshot_without_a_claimed_study_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], study_name: Any,
                                                       expected: str) -> None:
    forged = snapshot("champion", "win", study=study_name)
    path = tmp_path / "forged.json"
    write_text_atomic(path, json.dumps(forged.to_dict(), indent=1, ensure_ascii=False) + "\n")
    assert promote(tmp_path, path, "--runs", str(tmp_path / "runs")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err
    assert not (tmp_path / "registry" / "promotions.json").exists()
