"""criteria.decision=cheapest_noninferior through a real small search: the incumbent is the big
model, the champion is the cheapest feasible dev member within the margin of its dev quality, and
the claim tests non-inferiority plus a per-task cost saving."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ARGS = [ONE_AT_A_TIME, "search.study=cheap", "search.rounds=1", "search.trials_per_round=6", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]",
        "search.samples=1", "search.population_size=2", "search.max_front_dev=4", "search.resamples=2000",
        "model=sim_large", "search.models=[sim_small,sim_medium]", "criteria.decision=cheapest_noninferior", "criteria.margin=0.1"]


def test_cheapest_noninferior_ships_the_cheapest_member_within_the_margin(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-m", "evoharness", "search",
                           f"runs_dir={tmp_path}", *ARGS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "cheap" / "summary.json").read_text(encoding="utf-8"))
    claim = summary["claim"]
    assert claim["decision"] == "cheapest_noninferior" and claim["margin"] == 0.1 and "cost_saving_low" in claim
    assert claim["verdict"] in ("win", "no_win", "inconclusive")
    reference = summary["baseline"]["dev"]["pass_rate"]
    on_dev = [m for m in summary["front"] if m.get("dev") and m["dev_verdict"]["feasible"]]
    base_cost = summary["baseline"]["dev"]["cost_per_task"]
    cheaper = [m for m in on_dev if m["dev"]["cost_per_task"] < base_cost]
    by_interval = [m for m in cheaper if m["dev_vs_reference"]["low"] >= -0.1 - 1e-12]
    by_point = [m for m in cheaper if m["dev"]["pass_rate"] >= reference - 0.1 - 1e-12]
    champion, decision = summary["champion"], summary["decision"]
    assert decision["rule"] == "cheapest_noninferior" and decision["reference"] == "incumbent"
    for m in on_dev:  # the paired dev difference is the pass-rate difference on the same tasks
        assert abs(m["dev_vs_reference"]["mean_diff"] - (m["dev"]["pass_rate"] - reference)) < 1e-9
    eligible, evidence = (by_interval, "interval") if by_interval else (by_point, "point")
    if eligible:
        assert decision["evidence"] == evidence
        assert champion["dev"]["cost_per_task"] == min(m["dev"]["cost_per_task"] for m in eligible)
        assert champion["dev"]["cost_per_task"] < base_cost
    else:  # the incumbent stays, and no look at the holdout is spent on it
        assert decision["evidence"] == "none" and champion["variant_hash"] == summary["baseline"]["variant_hash"]
        assert "no front member is cheaper than the incumbent" in proc.stdout + proc.stderr
        assert not (tmp_path / "cheap" / "holdout_looks.jsonl").exists() and claim["looks"] == 0
    assert summary["headline"].startswith("decision cheapest_noninferior (margin 0.1):")


def test_a_named_reference_model_is_what_the_champion_must_match(tmp_path: Path) -> None:
    """criteria.reference=sim_large on a sim_small incumbent: "the cheapest that is as good as the big
    model": the base harness on sim_large is evaluated on dev and holdout, selection and the claim
    compare with it, and the summary says so."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    args = [a for a in ARGS if not a.startswith(("model=", "search.models=", "search.study="))]
    proc = subprocess.run([sys.executable, "-m", "evoharness", "search",
                           f"runs_dir={tmp_path}", *args, "search.study=ref", "model=sim_small",
                           "search.models=[sim_medium,sim_large]", "criteria.reference=sim_large"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "ref" / "summary.json").read_text(encoding="utf-8"))
    reference, claim, decision = summary["reference"], summary["claim"], summary["decision"]
    assert reference["name"] == "sim_large" and decision["reference"] == "sim_large"
    assert claim["baseline_hash"] == reference["variant_hash"] != summary["baseline"]["variant_hash"]
    assert decision["reference_quality"] == reference["dev"]["pass_rate"]
    assert "the reference (sim_large)" in summary["headline"]
    if decision["evidence"] != "best_quality":
        assert summary["champion"]["dev"]["cost_per_task"] < reference["dev"]["cost_per_task"]


def test_when_nothing_cheaper_is_as_good_the_incumbent_stays_and_the_holdout_stays_sealed(tmp_path: Path) -> None:
    """sim_small is the incumbent and every alternative (sim_large, the verify step) costs more: the
    answer is "keep what you run", with nothing to promote and no holdout look spent."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    args = [a for a in ARGS if not a.startswith(("model=", "search.models=", "search.study="))]
    proc = subprocess.run([sys.executable, "-m", "evoharness", "search",
                           f"runs_dir={tmp_path}", *args, "search.study=keep", "model=sim_small",
                           "search.models=[sim_large]", "search.formats=[json]", "search.temperatures=[0.0]"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "keep" / "summary.json").read_text(encoding="utf-8"))
    assert summary["decision"]["evidence"] == "none"
    assert summary["champion"]["variant_hash"] == summary["baseline"]["variant_hash"]
    assert summary["claim"]["looks"] == 0 and not (tmp_path / "keep" / "holdout_looks.jsonl").exists()
    # nothing was run on the holdout, so nothing was paid there: the claim is on no task
    spend = [json.loads(line) for line in (tmp_path / "keep" / "spend.jsonl").read_text(encoding="utf-8").splitlines()]
    assert not [r for r in spend if r["split"] == "holdout"] and summary["claim"]["n"] == 0 and summary["baseline"]["holdout"] == {}
    assert not (tmp_path / "keep" / "champion.json").exists()
    assert "the holdout stays sealed" in summary["headline"] and "the holdout stays sealed" in proc.stdout
