"""No free lunch, and spend known before it is spent: a route with no price is refused by a search
(unless declared free), shown as unpriced by evaluate (never $0), and a spend cap below the
baseline's forecast is refused before any model call. Real HTTP: the provider-shaped stub server
(tests/provider/stub.py), reached through litellm's openai route under a model name litellm has no
price for."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoharness.search.cli.main import main
from tests.provider.stub import StubProvider, serve

UNPRICED = "openai/evo-unpriced-model"  # no such model in litellm's map
TINY = ["search.train_limit=3", "workload.options.categories=[multi_turn_base]", "search.samples=1", "search.population_size=2",
        "search.resamples=200", "runs_dir=runs"]


@pytest.fixture
def server() -> Iterator[tuple[str, StubProvider]]:
    provider = StubProvider(key="stub-key-unused")
    srv = serve(provider)
    yield provider.url, provider
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVO_STUB_KEY", "stub-key-unused")


def model_file(tmp: Path, url: str, *extra: str) -> str:
    conf = tmp / "myconf" / "model"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "mystery.yaml").write_text("\n".join(["defaults:", "  - model_schema", "  - _self_", f"route: {UNPRICED}",
                                                  f"api_base: {url}", "api_key_env: EVO_STUB_KEY", *extra]) + "\n", encoding="utf-8")
    return str(tmp / "myconf")


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_an_unpriced_model_in_search_models_is_refused_in_one_line(tmp_path: Path, server: tuple[str, StubProvider],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = server
    err = refused(capsys, ["search", "--config-dir", model_file(tmp_path, url), "search.models=[mystery]", *TINY])
    assert f"search.models.mystery: route '{UNPRICED}' has no price" in err and "compares and reports what each variant costs" in err
    assert "Fix: set model/mystery.yaml's input_cost_per_token and output_cost_per_token" in err and "free=true" in err
    assert seen.requests == [] and not (tmp_path / "runs").exists()  # nothing paid, nothing written


def test_free_true_lets_an_unpriced_model_through(tmp_path: Path, server: tuple[str, StubProvider],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = server
    # the next check along (a cap far too small) is what stops it: the price check let the model through
    err = refused(capsys, ["search", "--config-dir", model_file(tmp_path, url, "free: true"), "search.models=[mystery]",
                           "search.budget_usd=0.000001", *TINY])
    assert err.startswith("error: search.budget_usd: 1e-06 is below the baseline's projected") and "mystery" not in err
    assert seen.requests == []


@pytest.mark.parametrize("argv, path", [
    (["model.route=" + UNPRICED, "model.api_base=URL", "model.api_key_env=EVO_STUB_KEY"], "model: "),
    (["mutators.enabled=[{name: llm_prompt_rewriter, params: {route: " + UNPRICED + ", api_base: 'URL', api_key_env: EVO_STUB_KEY}}]"],
     "mutators.enabled[0].params.route: "),
    (["+model@agent.escalation.model=sim_large", "agent.escalation.model.route=" + UNPRICED, "agent.escalation.model.api_base=URL",
      "agent.escalation.model.api_key_env=EVO_STUB_KEY", "agent.escalation.model.input_cost_per_token=null",
      "agent.escalation.model.output_cost_per_token=null"], "agent.escalation.model: "),
], ids=["incumbent", "llm_mutator", "escalation"])
def test_every_route_the_search_pays_for_is_priced(server: tuple[str, StubProvider], capsys: pytest.CaptureFixture[str],
                                                   argv: list[str], path: str) -> None:
    url, seen = server
    err = refused(capsys, ["search", *[a.replace("URL", url) for a in argv], *TINY])
    assert err.startswith(f"error: {path}route '{UNPRICED}' has no price") and "free=true" in err
    assert seen.requests == []


def test_a_budget_below_the_projected_baseline_is_refused_before_any_call(server: tuple[str, StubProvider], tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = server
    priced = [f"model.route={UNPRICED}", f"model.api_base={url}", "model.api_key_env=EVO_STUB_KEY",
              "model.input_cost_per_token=1e-5", "model.output_cost_per_token=3e-5"]
    err = refused(capsys, ["search", *priced, "search.budget_usd=0.05", *TINY])
    assert err.startswith("error: search.budget_usd: 0.05 is below the baseline's projected train evaluation, about $")
    baseline = float(re.search(r"train evaluation, about \$([0-9.]+)", err).group(1))
    finish = float(re.search(r"need about \$([0-9.]+) after it", err).group(1))
    suggested = float(re.search(r"Fix: set search.budget_usd=([0-9.]+)", err).group(1))
    assert 0.05 < baseline and baseline + finish <= suggested
    assert seen.requests == [] and not (tmp_path / "runs").exists()
    # the same search under a cap it fits in passes the check: only the cap decided it (stopped by the next refusal along)
    err = refused(capsys, ["search", *priced, f"search.budget_usd={suggested}", "search.study=registry", *TINY])
    assert "search.study: 'registry' is a folder" in err and seen.requests == []


def test_evaluate_on_an_unpriced_route_says_unpriced_never_zero(server: tuple[str, StubProvider], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = server
    run = ["evaluate", f"model.route={UNPRICED}", f"model.api_base={url}", "model.api_key_env=EVO_STUB_KEY", "workload.limit=2",
           "workload.samples=1", "cache_dir=null"]
    assert main([*run, "runs_dir=unpriced"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cost_per_task\s+unpriced$", out, re.M), out
    [path] = (tmp_path / "unpriced").glob("evaluate/*/eval.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["schema_version"] == 2 and record["priced"] is False and len(seen.requests) >= 2
    assert "cost_per_task" not in record["metrics"] and "cost_total" not in record["metrics"]
    assert record["metrics"]["unpriced_episodes"] == record["metrics"]["episodes"] == 2
    assert record["billing"]["billed_cost"] is None and record["billing"]["cost_if_uncached"] is None
    assert all(e["cost_usd"] is None for e in record["episodes"]) and all(t["cost_mean"] is None for t in record["tasks"])
    # declared free, the same route costs $0, and says so
    assert main([*run, "model.free=true", "runs_dir=free"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cost_per_task\s+\$0\.00$", out, re.M), out
    [path] = (tmp_path / "free").glob("evaluate/*/eval.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["priced"] is True and record["metrics"]["cost_per_task"] == 0.0 and record["metrics"]["unpriced_episodes"] == 0
