"""Holdout looks are counted: a resume of a finished study with more rounds either keeps the same
champion (the same look: nothing appended) or, for a champion other than the first look's (here:
another study's, on the same sealed split), is refused before the holdout runs again;
search.second_look=true allows it and the claim and report say so. `evaluate` on the holdout needs
unseal_holdout=true, and its look is journaled in the registry under the sealed split, where a
search's claim counts it; the run itself refuses the holdout when the pre-run checks were skipped."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.compiler.runtime.workload import workload_factory
from evoharness.search.records.looks import Seal, holdout_hash, read_looks, seen_looks
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
TINY = [ONE_AT_A_TIME, "search.study=look", "search.trials_per_round=4", "mutators.enabled=[]", "search.train_limit=10",
        "workload.options.categories=[multi_turn_base]", "+workload.options.limit_per_split=20", "search.samples=1",
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

    # another study on the same sealed split looked first, at another champion, and this study's own
    # looks are gone with their results: refused before the holdout runs again, whichever champion
    # two rounds find, and the first claim is kept as it was
    journal, registry = tmp_path / "look" / "holdout_looks.jsonl", tmp_path / "registry" / "holdout_looks.jsonl"
    forget_look(tmp_path / "look", claim["champion_hash"])
    [row] = read_looks(registry)
    registry.write_text(json.dumps({**row, "study": "elsewhere", "variant_hash": "f" * 64, "champion_hash": "f" * 64}) + "\n")
    journal.write_text(json.dumps({**looks[0], "champion_hash": "f" * 64}) + "\n", encoding="utf-8")
    more = run(tmp_path, "search", *TINY, "search.rounds=2")
    assert more.returncode == 2 and "would be a second look" in more.stderr.splitlines()[-1], more.stderr[-2000:]
    assert "study 'elsewhere'" in more.stderr.splitlines()[-1]
    assert json.loads((tmp_path / "look" / "claim.json").read_text(encoding="utf-8")) == claim
    assert len(read_looks(journal)) == 1 and len(read_looks(registry)) == 1
    forced = run(tmp_path, "search", *TINY, "search.rounds=2", "search.second_look=true")
    assert forced.returncode == 0, forced.stderr[-2000:]
    second = json.loads((tmp_path / "look" / "claim.json").read_text(encoding="utf-8"))
    assert second["looks"] == 2 and second["second_look"] is True and "Second look" in forced.stdout
    assert [r["look"] for r in read_looks(journal)] == [1, 2]
    assert [r["study"] for r in read_looks(registry)] == ["elsewhere", "look"]
    assert "Second look at the holdout" in (tmp_path / "look" / "report.html").read_text(encoding="utf-8")


def forget_look(study: Path, variant: str) -> None:
    """Delete what shows that ``study`` evaluated ``variant`` on the holdout: the stored evaluation and its spend lines."""
    for path in (study / "evals").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["split"] == "holdout" and record["variant_hash"] == variant:
            path.unlink()
    spend = [line for line in (study / "spend.jsonl").read_text(encoding="utf-8").splitlines()
             if not (json.loads(line)["split"] == "holdout" and json.loads(line)["variant_hash"] == variant)]
    (study / "spend.jsonl").write_text("".join(f"{line}\n" for line in spend), encoding="utf-8")


def test_evaluate_on_the_holdout_is_unsealed_on_purpose_and_recorded(tmp_path: Path) -> None:
    sealed = run(tmp_path, "evaluate", "workload.split=holdout", "workload.limit=2")
    assert sealed.returncode == 2 and "unseal_holdout=true" in sealed.stderr
    opened = run(tmp_path, "evaluate", "workload.split=holdout", "workload.limit=2", "unseal_holdout=true")
    assert opened.returncode == 0, opened.stderr[-2000:]
    [look] = read_looks(tmp_path / "registry" / "holdout_looks.jsonl")
    assert look["by"] == "evaluate" and look["tasks"] == 2 and look["eval"].endswith("eval.json")
    # under the sealed split's own hash (all of its tasks, not the two run), which a search's claim counts
    categories = ["multi_turn_base", "multi_turn_miss_param", "multi_turn_long_context", "multi_turn_miss_func"]  # conf/workload/bfcl.yaml
    holdout = [t.task_id for t in workload_factory("bfcl")(categories=categories).tasks("holdout")]
    assert look["holdout_hash"] == holdout_hash("bfcl", holdout) and look["splits_hash"] is None
    evaluated = json.loads(Path(look["eval"]).read_text(encoding="utf-8"))["variant_hash"]
    seen = seen_looks(study="s", journal=tmp_path / "none", evals=tmp_path / "none", spend=tmp_path / "none",
                      registry_rows=[look], seal=Seal(holdout_hash=holdout_hash("bfcl", reversed(holdout)), splits_hash="x"), exclude=())
    assert seen == {evaluated: ["`evoharness evaluate`"]}
    # and by the scenarios it holds: a search on one category (another task set, another hash) counts it too
    assert len(look["holdout_clusters"]) == 81 and "bfcl/scenario_173" not in look["holdout_clusters"]
    base_only = workload_factory("bfcl")(categories=["multi_turn_base"]).tasks("holdout")
    narrower = Seal(holdout_hash=holdout_hash("bfcl", [t.task_id for t in base_only]), splits_hash="y",
                    clusters=frozenset(t.cluster for t in base_only))
    assert seen_looks(study="s", journal=tmp_path / "none", evals=tmp_path / "none", spend=tmp_path / "none",
                      registry_rows=[look], seal=narrower, exclude=()) == {evaluated: ["`evoharness evaluate`"]}


@pytest.mark.parametrize("args, said", [
    (["+trial=x", "unseal_holdout=true"], "trial: is the search's own per-job setting"),
    ([], "workload.split: holdout is the sealed split"),
    (["unseal_holdout=true", "registry_dir=''"], "registry_dir: is empty, and a look at the holdout is recorded in the registry"),
])
def test_the_run_itself_holds_the_seal_when_the_checks_are_skipped(tmp_path: Path, args: list[str], said: str) -> None:
    """A run the pre-run checks did not see (a sweep past the combinations they compose, a caller
    that skips them) refuses the holdout the same way, before any episode is paid for."""
    from evoharness.compiler.errors import ConfigError
    from evoharness.compiler.hydra_run import run_command
    from evoharness.search.cli.commands import evaluate_task

    with pytest.raises(ConfigError, match=re.escape(said)):
        run_command("evaluate", [f"runs_dir={tmp_path}", "workload.split=holdout", "workload.limit=1", *args], evaluate_task, None)
    assert not list(tmp_path.rglob("holdout_looks.jsonl")) and not list(tmp_path.rglob("eval.json"))
