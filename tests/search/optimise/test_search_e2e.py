"""`evoharness search` end to end through Hydra, the nsga2 sweeper and a real launcher, on a tiny budget."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from evoharness.search.optimise.study import distinct_evaluations, eval_keys, free_rereads, paid_evaluations
from evoharness.search.records import transcripts
from evoharness.search.records.format import fmt_metric
from evoharness.search.records.transcript_view import pick_sides

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
# the budget counts below are whole evaluations: no proposal runs on past the six train tasks here
# (the extension is tested in test_race.py)
TINY = ["search.train_limit=6", "search.race.max_tasks=6",
        "workload.options.categories=[multi_turn_base]", "search.samples=1", "search.population_size=2", "search.max_front_dev=2",
        "search.resamples=2000"]


def search(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "evoharness", "search",
                           f"runs_dir={tmp}", *TINY, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def round_study(tmp: Path, study: str, k: int) -> optuna.Study:
    return optuna.load_study(study_name=f"{study}/r{k}", storage=f"sqlite:///{tmp / study / 'study.db'}")


def trials(tmp: Path, study: str, k: int) -> list[optuna.trial.FrozenTrial]:
    return [t for t in round_study(tmp, study, k).trials if t.state.is_finished()]


def evaluations(tmp: Path, study: str, k: int) -> int:
    """The budget counts paid evaluations: a genome proposed again, or evaluated by an earlier
    round, is answered from storage and does not count."""
    earlier: set[str] = set()
    for j in range(k):
        earlier |= eval_keys(round_study(tmp, study, j))
    return paid_evaluations(round_study(tmp, study, k), earlier)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("search")
    proc = search(tmp, "search.study=e2e", "search.rounds=2", "search.trials_per_round=4",
                  "mutators.enabled=[{name: identity}, {name: rule_miner}]")
    return tmp, proc


def test_search_writes_front_claim_ledger_and_report(first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, proc = first_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp / "e2e" / "summary.json").read_text(encoding="utf-8"))
    kept = summary["champion"]["variant_hash"] == summary["baseline"]["variant_hash"]
    # a claim for a candidate, or plainly none when the incumbent stays (never a verdict of the incumbent against itself)
    holdout = "Holdout: no candidate was claimed; the incumbent stays" if kept else "Holdout verdict:"
    assert "Pareto front of study e2e" in proc.stdout and holdout in proc.stdout and "Report:" in proc.stdout
    assert proc.stdout.index("Answer: ") < proc.stdout.index("Pareto front")  # the answer comes first
    spent = summary["spend"]["spent_usd"]
    assert summary["spend"]["projected_usd"] > 0 and f"  Spent: {fmt_metric(spent, 'cost')}" in proc.stdout.split("Pareto front")[0]
    assert "+trial=" not in proc.stdout + proc.stderr  # the launcher's per-job lines are off unless hydra.verbose=true
    assert evaluations(tmp, "e2e", 0) == 4 and evaluations(tmp, "e2e", 1) == 4
    # round 1 re-reads the baseline and round 0's front for free: its 4 paid evaluations are all new genomes
    r0, r1 = round_study(tmp, "e2e", 0), round_study(tmp, "e2e", 1)
    assert r0.metric_names == r1.metric_names == ["pass_rate", "cost_per_task", "latency_p95"]  # named in optuna-dashboard
    reread = free_rereads(r1, eval_keys(r0))
    assert reread >= 1 and len(eval_keys(r1) - eval_keys(r0)) == 4
    assert f"round 1: 4 paid evaluations, {reread} free re-reads" in proc.stdout
    assert "proposals: " in proc.stdout.split("round 1:")[1].splitlines()[0]
    results = yaml.safe_load((tmp / "e2e" / "optimization_results.yaml").read_text())
    assert results["solutions"] and all(len(s["values"]) == len(results["objectives"]) for s in results["solutions"])
    claim = json.loads((tmp / "e2e" / "claim.json").read_text())
    assert claim["verdict"] in ("win", "no_win", "inconclusive", "equivalent")
    # the holdout's 81 scenarios for a candidate; none when the incumbent stays, and nothing paid there
    assert claim["n"] == claim["clusters"] == (0 if kept else 81)
    holdout_rows = [r for r in map(json.loads, (tmp / "e2e" / "spend.jsonl").read_text().splitlines()) if r["split"] == "holdout"]
    assert (holdout_rows == []) == kept
    assert set(claim["hashes"]) == {"config", "workload", "splits", "scorer"}
    assert claim["low"] <= claim["mean_diff"] <= claim["high"] and 0 <= claim["p_value"] <= 1 and claim["metric"] == "pass_rate"
    ledger = [json.loads(line) for line in (tmp / "e2e" / "ledger.jsonl").read_text().splitlines()]
    assert (len(ledger) == len(trials(tmp, "e2e", 0)) + len(trials(tmp, "e2e", 1))
            and {"genome", "authors", "diff", "decision", "train", "eval_cost_usd"} <= set(ledger[0]))
    assert sum(r["decision"] == "champion" for r in ledger) >= 1
    assert (tmp / "e2e" / "report.html").stat().st_size > 1000
    strata = json.loads((tmp / "e2e" / "freeze.json").read_text())["split_strata"]
    assert sum(strata["dev"].values()) == 38 and sum(strata["holdout"].values()) == 81 and sum(strata["train"].values()) == 6
    assert len(strata["train"]) == 6  # train_limit=6 takes six different API-class strata, not a prefix of one
    assert "<h2>Splits</h2>" in (tmp / "e2e" / "report.html").read_text()
    pools = json.loads((tmp / "e2e" / "pools" / "r1.json").read_text())
    assert any(a["author"] == "rule_miner" for a in pools["added"]), "round 1 should search over mined rules"
    assert any(c["author"] == "identity" for c in pools["controls"])
    assert any(r["origin"] == "control" and r["control"] == "identity" and r["round"] == 1 for r in ledger), (
        "the identity control must be evaluated, not skipped")
    summary = json.loads((tmp / "e2e" / "summary.json").read_text())
    if summary["snapshots"]["champion_path"]:
        snap = Path(summary["snapshots"]["champion_path"])
        assert json.loads(snap.read_text())["content_hash"] == summary["snapshots"]["champion"]
    trial_hashes = {r["variant_hash"] for r in ledger}
    assert all(m["variant_hash"] in trial_hashes for m in summary["front"]), "the front must be the variants the trials evaluated"


def test_every_evaluation_keeps_its_transcripts_and_view_shows_the_study(first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, proc = first_run
    assert proc.returncode == 0
    records = sorted((tmp / "e2e" / "evals").glob("*.json"))
    assert len(records) > 4
    for record in records:  # a raced proposal's whole evaluation included: its blocks' transcripts, concatenated
        played = {(e["task_id"], e["sample"]) for e in json.loads(record.read_text())["report"]["episodes"]}  # one sample: no stand-ins
        assert {(t["task_id"], t["sample"]) for t in transcripts.read(record)} == played, record.name
    view = subprocess.run([sys.executable, "-m", "evoharness", "view", "e2e", "--runs", str(tmp), "--split", "train"], cwd=tmp,
                          capture_output=True, text=True, timeout=300)
    assert view.returncode == 0, view.stderr
    page = Path(view.stdout.strip())
    assert page == tmp / "e2e" / "transcripts.html"
    text = page.read_text(encoding="utf-8")
    data = json.loads(text.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0])
    summary = json.loads((tmp / "e2e" / "summary.json").read_text())
    assert [s["variant"] for s in data["sides"]] == [h for _, h in pick_sides(summary)]
    assert all(len(s["episodes"]) == 6 for s in data["sides"])  # every train task, with its conversation
    assert all(e["messages"][0]["role"] == "system" and len(e["messages"]) > 2 for s in data["sides"] for e in s["episodes"])
    assert str(tmp) not in text  # where the study lives on this machine stays out of a page that is shared
    missing = subprocess.run([sys.executable, "-m", "evoharness", "view", "nosuch", "--runs", str(tmp)], cwd=tmp,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "evoharness search search.study=nosuch" in missing.stderr


def test_the_report_links_each_front_members_failed_tasks_to_its_transcripts(
        first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, proc = first_run
    assert proc.returncode == 0
    summary = json.loads((tmp / "e2e" / "summary.json").read_text())
    report = (tmp / "e2e" / "report.html").read_text(encoding="utf-8")
    members = [m for m in summary["front"] if m["variant_hash"] != summary["baseline"]["variant_hash"]]
    assert members and all(m.get("transcripts") for m in members)
    for m in members:
        found = m["transcripts"]
        assert found["split"] == ("dev" if m.get("dev") else "train")
        page = tmp / "e2e" / found["page"]
        data = json.loads(page.read_text(encoding="utf-8").split('<script type="application/json" id="data">', 1)[1]
                          .split("</script>", 1)[0])
        assert [s["variant"] for s in data["sides"]] == [summary["baseline"]["variant_hash"], m["variant_hash"]]
        episodes = data["sides"][1]["episodes"]
        assert set(found["failed"]) == {e["task_id"] for e in episodes if not e["passed"]}  # every failure, nothing else
        incumbent_failed = {e["task_id"] for e in data["sides"][0]["episodes"] if not e["passed"]}
        firsts = [t for t in found["failed"] if t not in incumbent_failed]
        assert found["failed"][:len(firsts)] == firsts  # where it lost ground first
        for task in found["failed"][:40]:
            assert f'href="{found["page"]}#task={task}"' in report
        # and its trial in the dashboard's view is this variant
        view = optuna.load_study(study_name="e2e/all", storage=f"sqlite:///{tmp / 'e2e' / 'study.db'}")
        assert view.trials[m["dashboard_trial"]].user_attrs["variant_hash"] == m["variant_hash"]
    assert str(tmp) not in report


def test_rerun_resumes_keeps_trials_and_does_not_repay(first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, proc = first_run
    assert proc.returncode == 0
    before = {t.number: t.datetime_start for t in trials(tmp, "e2e", 0)}
    evals = {p.name: p.stat().st_mtime_ns for p in (tmp / "e2e" / "evals").iterdir()}
    # more rounds may pick another champion: a second look at the holdout, allowed here explicitly
    again = search(tmp, "search.study=e2e", "search.rounds=2", "search.trials_per_round=5", "search.second_look=true",
                   "mutators.enabled=[{name: identity}, {name: rule_miner}]")
    assert again.returncode == 0, again.stderr[-3000:]
    after = {t.number: t.datetime_start for t in trials(tmp, "e2e", 0)}
    assert evaluations(tmp, "e2e", 0) == 5 and all(after[n] == start for n, start in before.items())
    assert evaluations(tmp, "e2e", 1) == 5
    still = {p.name: p.stat().st_mtime_ns for p in (tmp / "e2e" / "evals").iterdir()}
    assert all(still[name] == mtime for name, mtime in evals.items()), "a finished evaluation was run again"
    ledger = (tmp / "e2e" / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == len(trials(tmp, "e2e", 0)) + len(trials(tmp, "e2e", 1))


def test_changed_config_refuses_to_resume(first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, _ = first_run
    proc = search(tmp, "search.study=e2e", "search.rounds=1", "search.trials_per_round=4", "mutators.enabled=[]", "agent.max_turns=5")
    assert proc.returncode == 2
    assert "was started with a different config_hash" in proc.stderr.splitlines()[-1]


def test_promote_champion_then_compile_ships_it(first_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    tmp, proc = first_run
    assert proc.returncode == 0
    champion = tmp / "e2e" / "champion.json"
    summary = json.loads((tmp / "e2e" / "summary.json").read_text())
    if summary["champion"]["variant_hash"] == summary["baseline"]["variant_hash"]:
        assert not champion.exists()  # the baseline is already what ships
        return
    snap = json.loads(champion.read_text())
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cli = [sys.executable, "-m", "evoharness"]
    promote = subprocess.run([*cli, "promote", str(champion), "--registry", str(tmp / "registry")],
                             cwd=ROOT, env=env, capture_output=True, text=True)
    if snap["provenance"]["claim"]["verdict"] != "win":
        assert promote.returncode == 2 and "not an improvement" in promote.stderr
        promote = subprocess.run([*cli, "promote", str(champion), "--force", "--registry", str(tmp / "registry")],
                                 cwd=ROOT, env=env, capture_output=True, text=True)
    assert promote.returncode == 0, promote.stderr
    # promote says what it promoted and compile which release it shipped, in the same words
    shipped = (f"slot default of {snap['component']} is snapshot {snap['content_hash'][:12]} "
               f"(variant {snap['provenance']['variant_hash'][:12]}, study e2e, trial {snap['provenance']['trial']})")
    assert promote.stdout == f"promoted: {shipped}; the next `evoharness compile` ships it\n"
    compiled = subprocess.run([*cli, "compile", f"runs_dir={tmp}"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    assert compiled.stdout.split()[0] == snap["provenance"]["variant_hash"]
    assert f"release: {shipped}, under this command's overrides" in compiled.stderr


def test_interrupted_search_resumes_without_redoing_trials(tmp_path: Path) -> None:
    """Kill the search mid-round (SIGKILL: no cleanup), re-run it: finished trials are kept as they
    were, a trial left running is closed and re-run, and the budget is met exactly."""
    import signal
    import time

    args = ["search.study=cut", "search.rounds=1", "search.trials_per_round=6", "mutators.enabled=[]"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([sys.executable, "-m", "evoharness", "search", f"runs_dir={tmp_path}", *TINY, *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = tmp_path / "cut" / "study.db"
    deadline = time.time() + 300
    done: list[optuna.trial.FrozenTrial] = []
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        # the spend journal exists only once the search has created its study and paid a batch:
        # reading the database earlier would race the search's own schema creation
        if (tmp_path / "cut" / "spend.jsonl").exists():
            try:
                done = [t for t in optuna.load_study(study_name="cut/r0", storage=f"sqlite:///{db}").trials if t.state.name == "COMPLETE"]
            except Exception:  # the study is being written: look again
                continue
            if len(done) >= 2:
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(done) >= 2, "the search did not get far enough to be interrupted"
    kept = {t.number: t.datetime_complete for t in done}
    again = search(tmp_path, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name="cut/r0", storage=f"sqlite:///{db}")
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert all(next(t for t in complete if t.number == n).datetime_complete == when for n, when in kept.items())
    assert distinct_evaluations(study) == 6, "interrupted trials must not use up the budget"
    cut = [t for t in study.trials if t.user_attrs.get("interrupted")]
    assert all(t.state.name == "FAIL" for t in cut) and not any(t.state.name == "RUNNING" for t in study.trials)
    assert all(any(c.params == t.params and c.user_attrs.get("rerun") for c in complete) for t in cut), "an interrupted trial is re-run"


def test_search_aborts_when_too_many_trials_fail(tmp_path: Path) -> None:
    # every model call is a 500: every episode is skipped, so no trial has a score
    proc = search(tmp_path, "search.study=down", "search.rounds=1", "search.trials_per_round=4", "mutators.enabled=[]",
                  "model.retries=0", "+model.extra.sim_faults.server_error_rate=1.0", "search.models=[]")
    assert proc.returncode == 2
    assert ("error: 2 of 2 trials failed in round 0 (search.max_failure_rate=0.5); first error: no scored episode"
            in proc.stderr.splitlines()[-1])
    study = optuna.load_study(study_name="down/r0", storage=f"sqlite:///{tmp_path / 'down' / 'study.db'}")
    assert all(t.state.name == "FAIL" and "skipped" in t.user_attrs["error"] for t in study.trials if t.state.is_finished())
