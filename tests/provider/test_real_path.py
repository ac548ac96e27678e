"""The path a real user takes, against a provider-shaped double with no side channel: an
OpenAI-compatible server on loopback (tests/provider/stub.py), reached through litellm's ``openai/``
route, with no ``sim/`` route anywhere. Each case runs ``evoharness`` as a user runs it, in its own
process, and checks the accounting against what the server saw: calls per sample, cost, skips,
retries and exit codes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.provider.conftest import KEY
from tests.provider.stub import StubProvider

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
REFUNDS = ROOT / "examples" / "refunds"
PRICE_IN, PRICE_OUT = 2e-6, 8e-6
SHOP = ["plugins=[refunds_shop]", "workload=refunds", "agent=refunds_agent", "tool=refunds"]


def model(stub: StubProvider, *, key_env: str | None = "STUB_KEY", temperature: float = 0.7, priced: bool = True) -> list[str]:
    return ["model.route=openai/desk-agent-1", f"model.api_base={stub.url}", f"model.temperature={temperature}",
            "model.send_episode_id=false", "model.retries=2", "model.backoff_s=0.01",
            *([f"model.api_key_env={key_env}"] if key_env else ["model.api_key_env=null"]),
            *([f"model.input_cost_per_token={PRICE_IN}", f"model.output_cost_per_token={PRICE_OUT}"] if priced else [])]


def run(tmp: Path, command: str, *overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``evoharness <command>`` as a user runs it: a search or a sweep in its own process, a single
    evaluate through the same entry point in this one (an interpreter's start-up is most of its time)."""
    base = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full = {**base, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REFUNDS), "STUB_KEY": KEY, **(env or {})}
    argv = [command, *SHOP, f"runs_dir={tmp / 'runs'}", f"cache_dir={tmp / 'cache'}", *overrides]
    if command == "search" or "-m" in overrides:
        return subprocess.run([sys.executable, "-m", "evoharness", *argv], cwd=tmp, env=full, capture_output=True, text=True,
                              timeout=600)
    return in_process(argv, tmp, full)


def in_process(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import contextlib
    import io

    from evoharness.search.cli.main import main

    saved_env, saved_cwd, out, err = dict(os.environ), Path.cwd(), io.StringIO(), io.StringIO()
    if str(REFUNDS) not in sys.path:
        sys.path.insert(0, str(REFUNDS))
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def record(tmp: Path) -> dict:
    found = sorted((tmp / "runs").rglob("eval.json"), key=lambda p: p.stat().st_mtime)
    assert found, "no eval.json written"
    return json.loads(found[-1].read_text())


def test_every_sample_is_its_own_provider_call_and_a_rerun_pays_for_none(stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "evaluate", *model(stub), "workload.split=dev", "workload.limit=4", "workload.samples=3")
    assert proc.returncode == 0, proc.stderr
    # 4 tasks x 3 samples: 12 episodes, each opened by its own call with its own seed
    opened = stub.starts()
    assert len(opened) == 12 and set(opened.values()) == {1}, opened
    per_task = Counter(text for text, _ in opened)
    assert len(per_task) == 4 and set(per_task.values()) == {3}
    assert all("user" not in body for body in stub.requests)  # no side channel reaches a provider
    rec = record(tmp_path)
    assert rec["metrics"]["episodes"] == 12 and rec["metrics"]["skipped"] == 0
    # the cost is the server's usage at the test's price, to the cent of a cent
    billed = sum(r["usage"]["prompt_tokens"] * PRICE_IN + r["usage"]["completion_tokens"] * PRICE_OUT
                 for r in (_replay(body) for body in stub.answered()))
    assert rec["billing"]["billed_cost"] == pytest.approx(billed, rel=1e-9)
    # latency is what the server reported it spent, not the loaded machine's clock
    made = sum(e["model_calls"] for e in rec["episodes"])
    assert made == len(stub.answered())
    assert sum(e["latency_s"] for e in rec["episodes"]) == pytest.approx(made * 0.040, rel=1e-6)
    calls = stub.calls()
    again = run(tmp_path, "evaluate", *model(stub), "workload.split=dev", "workload.limit=4", "workload.samples=3")
    assert again.returncode == 0, again.stderr
    assert stub.calls() == calls  # all twelve episodes came from the response cache
    assert record(tmp_path)["billing"]["billed_cost"] == 0.0
    assert record(tmp_path)["metrics"]["pass_rate"] == rec["metrics"]["pass_rate"]


def _replay(body: dict) -> dict:
    """The usage the stub billed for ``body`` (it is a pure function of the request)."""
    from tests.provider.stub import completion, respond

    return completion(body, respond(body))


def test_samples_at_temperature_differ_and_a_seed_reproduces_its_answer(stub: StubProvider) -> None:
    from tests.provider.stub import respond

    tools = [{"type": "function", "function": {"name": "cancel_order", "parameters": {"type": "object"}}}]
    opening = {"model": "m", "temperature": 1.5, "tools": tools,
               "messages": [{"role": "system", "content": "desk"}, {"role": "user", "content": "x"}]}
    later = [{"role": "tool", "content": '[{"order_id": "A-1"}, {"order_id": "A-2"}]'},
             {"role": "user", "content": "Please cancel my order."}]
    bodies = [{**opening, "seed": s, "messages": [*opening["messages"], *later]} for s in range(40)]
    answers = [json.dumps(respond(b)) for b in bodies]
    assert len(set(answers)) > 1  # stochastic at temperature > 0 ...
    assert answers == [json.dumps(respond(b)) for b in bodies]  # ... and reproducible under the seed


def test_a_missing_key_is_refused_before_any_call(stub: StubProvider, tmp_path: Path) -> None:
    unset = run(tmp_path, "evaluate", *model(stub, key_env="STUB_KEY"), "workload.limit=2", env={"STUB_KEY": ""})
    assert unset.returncode == 2 and len(unset.stderr.strip().splitlines()) == 1 and "STUB_KEY" in errors(unset)[0], unset.stderr
    # no api_key_env: litellm's own variable for the route must then be set
    bare = run(tmp_path, "evaluate", *model(stub, key_env=None), "workload.limit=2")
    assert bare.returncode == 2 and len(bare.stderr.strip().splitlines()) == 1 and "OPENAI_API_KEY" in errors(bare)[0], bare.stderr
    assert stub.calls() == 0
    assert not list((tmp_path / "runs").rglob("eval.json"))


def test_a_refused_key_stops_the_run_in_one_line_without_retries(stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "evaluate", *model(stub), "workload.limit=2", "workload.concurrency=1", env={"STUB_KEY": "sk-wrong"})
    assert proc.returncode == 2, proc.stderr
    (line,) = errors(proc)
    assert "refused the key" in line and "STUB_KEY" in line and "HTTP 401" in line, line
    assert "sk-wrong" not in proc.stderr and "Traceback" not in proc.stderr
    assert stub.calls() == 1  # fatal on the first answer: never retried, never an "outage"


def test_a_providers_400_is_one_line_naming_the_route_and_its_message(stub: StubProvider, tmp_path: Path) -> None:
    stub.fail_next(400, message="Unsupported parameter: 'temperature' is not supported with this model")
    proc = run(tmp_path, "evaluate", *model(stub), "workload.limit=1", "workload.concurrency=1")
    assert proc.returncode == 2, proc.stderr
    (line,) = errors(proc)
    assert "openai/desk-agent-1" in line and "HTTP 400: Unsupported parameter: 'temperature'" in line, line
    assert "Traceback" not in proc.stderr


def test_a_run_whose_episodes_were_all_skipped_fails_naming_the_error(stub: StubProvider, tmp_path: Path) -> None:
    from tests.provider.stub import Failure

    stub.always = Failure(503, "the desk model is overloaded")
    proc = run(tmp_path, "evaluate", *model(stub), "workload.limit=2", "workload.samples=1")
    assert proc.returncode == 1, proc.stderr
    (line,) = errors(proc)
    assert "2 of 2 episodes were skipped" in line and "overloaded" in line, proc.stderr
    rec = record(tmp_path)  # what was paid for (nothing) and why is kept
    assert rec["metrics"]["skipped"] == 2
    assert stub.calls() == 2 * 3  # each episode's first call: tried once, retried twice


def test_rate_limits_and_bursts_of_500s_are_retried_and_accounted(stub: StubProvider, tmp_path: Path) -> None:
    stub.fail_next(429, retry_after=0.01, message="slow down")
    stub.fail_next(500, times=1, message="burst")
    proc = run(tmp_path, "evaluate", *model(stub, temperature=0.0), "workload.limit=1", "workload.concurrency=1",
               "model.retries=3")
    assert proc.returncode == 0, proc.stderr
    rec = record(tmp_path)
    assert rec["metrics"]["skipped"] == 0 and rec["metrics"]["infra_seconds"] > 0
    assert stub.statuses[:3] == [429, 500, 200]
    assert rec["metrics"]["attempts"] == len(stub.statuses)  # every attempt the server saw, retries included


SEARCH = ["hydra/launcher=basic", "search.models=[]", "search.teacher=null", "search.rounds=1", "search.population_size=2",
          "search.trials_per_round=2", "search.samples=2", "search.max_front_dev=2", "search.resamples=200",
          "mutators.enabled=[{name:identity},{name:temperature}]", "search.formats=[json]", "search.temperatures=[0.0,0.7]",
          "search.study=stub", "search.allow_underpowered=true", "search.train_limit=6"]


def test_a_search_against_the_provider_pays_for_what_the_provider_billed_and_a_resume_pays_nothing(
        stub: StubProvider, tmp_path: Path) -> None:
    proc = run(tmp_path, "search", *model(stub, temperature=0.0), *SEARCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stub.calls() > 0 and all("user" not in body for body in stub.requests)
    spend = [json.loads(line) for line in (tmp_path / "runs" / "stub" / "spend.jsonl").read_text().splitlines()]
    billed = sum(r["usage"]["prompt_tokens"] * PRICE_IN + r["usage"]["completion_tokens"] * PRICE_OUT
                 for r in (_replay(body) for body in stub.answered()))
    # every call the server answered is in the study's spend, once, at the test's price
    assert sum(row["billed_usd"] for row in spend) == pytest.approx(billed, rel=1e-9)
    assert sum(row["attempts"] for row in spend) == stub.calls()
    summary = json.loads((tmp_path / "runs" / "stub" / "summary.json").read_text())
    # the cap counts what each evaluation costs uncached (a replay a killed run paid for is not free)
    assert summary["spend"]["spent_usd"] == pytest.approx(sum(row["cost_usd"] for row in spend), abs=1e-6)
    assert summary["spend"]["spent_usd"] >= billed - 1e-6
    calls = stub.calls()
    again = run(tmp_path, "search", *model(stub, temperature=0.0), *SEARCH)
    assert again.returncode == 0, again.stderr[-3000:]
    assert stub.calls() == calls  # the resumed search re-ran no paid rollout


def test_in_a_sweep_a_run_that_skipped_too_much_fails_its_own_job_and_the_comparison_stays(stub: StubProvider, tmp_path: Path) -> None:
    from tests.provider.stub import Failure

    stub.always = Failure(503, "the desk model is overloaded")
    proc = run(tmp_path, "evaluate", "-m", *model(stub), "workload.limit=1", "workload.max_skip_rate=1.0,0.5",
               "hydra/launcher=basic")
    assert proc.returncode != 0
    [summary] = (tmp_path / "runs").rglob("sweep_summary.json")
    jobs = json.loads(summary.read_text())["jobs"]
    assert [j["status"] for j in jobs] == ["ok", "failed"], jobs


def test_the_python_api_raises_run_failed_with_the_report(stub: StubProvider, tmp_path: Path) -> None:
    from tests.provider.stub import Failure

    stub.always = Failure(503, "the desk model is overloaded")
    script = tmp_path / "script.py"
    overrides = [*SHOP, *model(stub), "workload.limit=2", f"runs_dir={tmp_path / 'runs'}", "cache_dir=null"]
    script.write_text(f"""
import evoharness
try:
    evoharness.evaluate({overrides!r})
except evoharness.RunFailed as exc:
    print("failed:", exc.result.metrics["skipped"], str(exc).split(";")[0])
""")
    env = {**{k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": str(REFUNDS), "STUB_KEY": KEY}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "failed: 2.0 2 of 2 episodes were skipped" in proc.stdout, proc.stdout


def test_a_server_that_refuses_seed_is_named_and_model_send_seed_false_reaches_it(stub: StubProvider, tmp_path: Path) -> None:
    stub.refuse_seed = True
    refused = run(tmp_path, "evaluate", *model(stub), "workload.limit=1", "workload.concurrency=1")
    assert refused.returncode == 2 and "model.send_seed=false" in errors(refused)[0] and "seed" in errors(refused)[0]
    before = stub.calls()
    proc = run(tmp_path, "evaluate", *model(stub), "model.send_seed=false", "workload.limit=2", "workload.samples=3")
    assert proc.returncode == 0, proc.stderr
    sent = stub.requests[before:]
    assert sent and all("seed" not in body for body in sent)
    # the seed still keys the response cache: three samples are three calls, not one reply replayed
    opened = Counter(str(body["messages"][1]["content"]) for body in sent if len(body["messages"]) == 2)
    assert sorted(opened.values()) == [3, 3], opened
