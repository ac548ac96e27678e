"""SIGKILL (no cleanup, no handler) at four moments, each followed by the same command: during a
round, during dev selection, during the holdout, and during `promote`. The model is the simulator
behind its real HTTP endpoint, reached through litellm's openai route, so every paid call is a
request the test counts. After the resumes: no round paid more than its budget or asked more than its quota, the ledger equals
the study's storage, the spend journal holds each paid evaluation once, and every request the
endpoint served belongs to a journaled evaluation or to one a kill cut short."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

import evoharness.compiler.sim.server as sim_server
from evoharness.compiler.release.registry import Registry
from evoharness.search.optimise.study import eval_keys, paid_evaluations
from evoharness.search.records.spend import read_spend

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ROUNDS, PER_ROUND = 2, 4
ASKS = 3 * PER_ROUND  # a round's asks (rounds.py): 6 train tasks are one race block, so a proposal costs a full evaluation
# eight temperatures x three formats: 24 genomes, so the sampler finds four new ones a round well within its asks
ARGS = ["search.study=k", f"search.rounds={ROUNDS}", f"search.trials_per_round={PER_ROUND}", "mutators.enabled=[]",
        "search.temperatures=[0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7]",
        "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]", "search.samples=1", "search.population_size=2", "search.max_front_dev=2",
        "search.resamples=2000",
        "search.models=[]", "model.route=openai/sim/small", "model.api_key_env=SIM_HTTP_KEY", "model.send_episode_id=true",
        # the best on dev ships (a temperature edit here), so the holdout is run: a search that keeps its incumbent runs nothing there
        "criteria=quality_first"]


class Calls:
    """Every request the endpoint received: its body's digest and when it was sent (wall clock)."""

    def __init__(self) -> None:
        self.sent: dict[str, list[float]] = {}
        self.tasks: list[str] = []  # the task each request was for (the route is sent the episode id)

    def record(self, body: Any) -> None:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        self.sent.setdefault(digest, []).append(time.time())
        self.tasks.append(str(body.get("user", "")).partition(";")[0].removeprefix("task_id="))


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Calls]]:
    calls = Calls()
    real = sim_server.handle_chat

    def counted(body: Any, gold: Any) -> Any:
        calls.record(body)
        return real(body, gold)

    monkeypatch.setattr(sim_server, "handle_chat", counted)
    with sim_server.BackgroundServer() as srv:
        yield srv.api_base, calls


def command(tmp: Path, api_base: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "SIM_HTTP_KEY": "sk-local-simulator-key"}
    return [sys.executable, "-m", "evoharness.search", f"runs_dir={tmp}", f"model.api_base={api_base}", *ARGS], env


KILLS: list[float] = []


def kill_when(tmp: Path, api_base: str, ready: Callable[[], bool], *, after_s: float = 0.0) -> None:
    cmd, env = command(tmp, api_base)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.1)
    assert proc.poll() is None, "the search finished before the moment came"
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGKILL)
    KILLS.append(time.time())
    proc.wait()


def journal_has(tmp: Path, marker: str) -> Callable[[], bool]:
    """An evaluation whose label carries ``marker`` is paid and journaled (spend.jsonl is written by the
    orchestrator once the storage exists, so reading the study then never races its creation)."""
    def ready() -> bool:
        spend = tmp / "k" / "spend.jsonl"
        return spend.exists() and any(marker in str(r.get("label", "")) for r in read_spend(spend))
    return ready


def serving(calls: Calls, split: str, n: int) -> Callable[[], bool]:
    """The endpoint has served ``n`` requests for ``split``'s tasks: that split's evaluations are under way."""
    from evoharness.compiler.runtime.workload import workload_factory

    ids = {t.task_id for t in workload_factory("bfcl")(categories=["multi_turn_base"]).tasks(split)}
    return lambda: sum(t in ids for t in calls.tasks) >= n


def completed_in_round(tmp: Path, k: int, n: int) -> Callable[[], bool]:
    def ready() -> bool:
        if not journal_has(tmp, f"r{k}-")():
            return False
        try:
            study = optuna.load_study(study_name=f"k/r{k}", storage=f"sqlite:///{tmp / 'k' / 'study.db'}")
        except Exception:  # being written: look again
            return False
        return sum(t.state.name == "COMPLETE" for t in study.trials) >= n
    return ready


def paid_per_round(db: Path) -> list[int]:
    studies = [optuna.load_study(study_name=f"k/r{k}", storage=f"sqlite:///{db}") for k in range(ROUNDS)]
    earlier: list[set[str]] = [set()]
    for s in studies:
        earlier.append(earlier[-1] | eval_keys(s))
    return [paid_evaluations(s, earlier[k]) for k, s in enumerate(studies)]


def test_sigkill_at_four_moments_then_resume(tmp_path: Path, endpoint: tuple[str, Calls]) -> None:
    api_base, calls = endpoint
    KILLS.clear()
    kill_when(tmp_path, api_base, completed_in_round(tmp_path, 1, 1), after_s=0.5)  # mid-round (round 1)
    kill_when(tmp_path, api_base, serving(calls, "dev", 40), after_s=0.0)  # dev selection
    kill_when(tmp_path, api_base, serving(calls, "holdout", 40), after_s=0.0)  # holdout
    cmd, env = command(tmp_path, api_base)
    final = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    db = f"sqlite:///{tmp_path / 'k' / 'study.db'}"
    studies = [optuna.load_study(study_name=f"k/r{k}", storage=db) for k in range(ROUNDS)]
    # the budget: paid evaluations per round (earlier rounds' genomes are free re-reads), never more
    # than a round buys; a round whose sampler ran out of asks pays for fewer. The asks are a round's
    # quota across its resumes (a resumed round is not given them again; an interrupted trial's rerun
    # stands for it), so a resume never buys what the uninterrupted search could not
    per_round = paid_per_round(tmp_path / "k" / "study.db")
    assert all(n <= PER_ROUND for n in per_round) and sum(per_round) >= ROUNDS * (PER_ROUND - 1), per_round
    for s in studies:
        asked = [t for t in s.trials if t.state.name != "WAITING" and not t.user_attrs.get("interrupted")]
        assert len(asked) <= ASKS, (s.study_name, len(asked))
    assert not any(t.state.name == "RUNNING" for s in studies for t in s.trials)
    stored = sorted((k, t.state.name, json.dumps(t.user_attrs.get("genome"), sort_keys=True))
                    for k, s in enumerate(studies) for t in s.trials if t.state.is_finished())
    ledger = [json.loads(line) for line in (tmp_path / "k" / "ledger.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted((r["round"], r["state"], json.dumps(r["genome"], sort_keys=True)) for r in ledger) == stored
    # paid calls: each kill may lose the call in flight (at most one per kill), never a finished one: the
    # response cache replays every finished call of a batch the kill cut short
    # paid evaluations: the journal holds each one once (a finished evaluation is never paid again),
    # and every request the endpoint served is one of theirs, or of an evaluation a kill cut short
    paid = read_spend(tmp_path / "k" / "spend.jsonl")
    keys = [r["eval_key"] for r in paid]
    assert keys and len(keys) == len(set(keys)), "an evaluation was paid for twice"
    served = sum(len(t) for t in calls.sent.values())
    journaled = sum(r["attempts"] for r in paid)
    assert len(KILLS) == 3 and journaled <= served <= journaled + len(KILLS) * max(r["attempts"] for r in paid)
    verdict = json.loads((tmp_path / "k" / "claim.json").read_text(encoding="utf-8"))["verdict"]
    assert verdict in ("win", "no_win", "inconclusive", "equivalent")

    # promote, killed at increasing delays: the registry is always whole, and a last promote succeeds
    champion = tmp_path / "k" / "champion.json"
    target = champion if champion.exists() else sorted((tmp_path / "registry" / "snapshots").glob("*.json"))[0]
    registry = tmp_path / "registry"
    for delay in (0.2, 0.5, 0.8, 1.1, 1.4, 1.7):
        proc = subprocess.Popen([sys.executable, "-m", "evoharness", "promote", str(target),
                                 "--registry", str(registry), "--force"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        good, tampered = Registry(registry).scan()  # a kill between a temp file and its rename may leave the temp: never read
        assert tampered == []
        history = json.loads((registry / "promotions.json").read_text(encoding="utf-8")) if (registry / "promotions.json").exists() else {}
        assert isinstance(history, dict)
    last = subprocess.run([sys.executable, "-m", "evoharness", "promote", str(target),
                           "--registry", str(registry), "--force"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert last.returncode == 0, last.stderr
    assert not list(registry.rglob("*.tmp"))  # the next write cleared any temp file a killed writer left
