"""Holdout looks are counted: a resume of a finished study with more rounds either keeps the same
champion (the same look: nothing appended) or, for a champion other than the first look's, is refused
before the holdout runs again; search.second_look=true allows it and the claim and report say so. `evaluate` on the holdout needs
unseal_holdout=true and leaves a record in the registry."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evoharness.search.records.looks import read_looks

from tests.runs import ONE_AT_A_TIME

ROOT = Path(__file__).resolve().parents[3]
TINY = [ONE_AT_A_TIME, "search.study=look", "search.trials_per_round=3", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]", "+workload.options.limit_per_split=12", "search.samples=1",
        "search.population_size=2", "search.max_front_dev=2", "search.resamples=2000", "search.models=[sim_large]",
        "model=sim_small", "criteria.decision=best_quality"]  # sim_large beats the incumbent: a candidate to look at


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "evoharness", *args, f"runs_dir={tmp}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_resume_with_more_rounds_never_takes_a_silent_second_look(tmp_path: Path) -> None:
    first = run(tmp_path, "search", *TINY, "search.rounds=1")
    assert first.returncode == 0, first.stderr[-2000:]
    claim = json.loads((tmp_path / "look" / "claim.json").read_text(encoding="utf-8"))
    assert claim["looks"] == 1 and claim["second_look"] is False
    looks = read_looks(tmp_path / "look" / "holdout_looks.jsonl")
    assert [r["champion_hash"] for r in looks] == [claim["champion_hash"]]

    again = run(tmp_path, "search", *TINY, "search.rounds=1")  # the same study, finished: the same look
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(read_looks(tmp_path / "look" / "holdout_looks.jsonl")) == 1

    # the holdout was first looked at for another champion (as when more rounds change it): refused
    # before the holdout runs again, and the first claim is kept as it was
    journal = tmp_path / "look" / "holdout_looks.jsonl"
    journal.write_text(json.dumps({**looks[0], "champion_hash": "f" * 64}) + "\n", encoding="utf-8")
    more = run(tmp_path, "search", *TINY, "search.rounds=2")
    assert more.returncode == 2 and "would be a second look" in more.stderr.splitlines()[-1], more.stderr[-2000:]
    assert json.loads((tmp_path / "look" / "claim.json").read_text(encoding="utf-8")) == claim
    assert len(read_looks(journal)) == 1
    forced = run(tmp_path, "search", *TINY, "search.rounds=2", "search.second_look=true")
    assert forced.returncode == 0, forced.stderr[-2000:]
    second = json.loads((tmp_path / "look" / "claim.json").read_text(encoding="utf-8"))
    assert second["looks"] == 2 and second["second_look"] is True and "Second look" in forced.stdout
    assert [r["look"] for r in read_looks(journal)] == [1, 2]
    assert "Second look at the holdout" in (tmp_path / "look" / "report.html").read_text(encoding="utf-8")


def test_evaluate_on_the_holdout_is_unsealed_on_purpose_and_recorded(tmp_path: Path) -> None:
    sealed = run(tmp_path, "evaluate", "workload.split=holdout", "workload.limit=2")
    assert sealed.returncode == 2 and "unseal_holdout=true" in sealed.stderr
    opened = run(tmp_path, "evaluate", "workload.split=holdout", "workload.limit=2", "unseal_holdout=true")
    assert opened.returncode == 0, opened.stderr[-2000:]
    [look] = read_looks(tmp_path / "registry" / "holdout_looks.jsonl")
    assert look["by"] == "evaluate" and look["tasks"] == 2
