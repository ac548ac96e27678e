"""Over a whole search: no task value reaches a mutator's proposal or an LLM mutator's request.

The search runs against the simulator's real HTTP endpoint (every request recorded), with the
evidence-driven and LLM-backed mutators on and the teacher consulted. The task values are every
gold argument value of the train tasks the search read, bare tokens (a stock symbol, a file name)
included, less the words the baseline's own prompt and tool documentation already contain.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evoharness.compiler.sim.server as sim_server
from evoharness.compiler.catalog import build_catalog
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
TRAIN = 10


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[Any]]]:
    bodies: list[Any] = []
    real = sim_server.handle_chat

    def recorded(body: Any, gold: Any) -> Any:
        bodies.append(json.loads(json.dumps(body)))
        return real(body, gold)

    monkeypatch.setattr(sim_server, "handle_chat", recorded)
    with sim_server.BackgroundServer() as srv:
        yield srv.api_base, bodies


def task_values(docs: str) -> set[str]:
    values: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)
        elif isinstance(v, str) and len(v) >= 3:
            values.add(v)
        elif isinstance(v, int | float) and not isinstance(v, bool) and abs(v) >= 100:
            values.add(str(v))

    for task in list(BfclWorkload(categories=["multi_turn_base"]).tasks("train"))[:TRAIN]:
        for turn in task.gold:
            for call in turn:
                walk(dict(call.arguments))
    return {v for v in values if not re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", docs)}


def test_no_task_value_reaches_a_proposal_or_a_request(tmp_path: Path, endpoint: tuple[str, list[Any]]) -> None:
    api_base, bodies = endpoint
    llm = f"{{route: openai/sim/medium, api_base: '{api_base}', api_key_env: SIM_HTTP_KEY, send_episode_id: true}}"
    mutators = ("[{name: rule_miner, params: {top_k: 25, max_tools: 3}}, {name: tool_description_append}, {name: tool_rule_add}, "
                f"{{name: llm_prompt_rewriter, params: {llm}}}, {{name: teacher_gap_rewriter, params: {llm}}}, "
                f"{{name: llm_workflow_editor, params: {llm}}}]")
    args = [ONE_AT_A_TIME, "search.study=leak", "search.rounds=2", "search.trials_per_round=6", "search.population_size=3",
            f"search.train_limit={TRAIN}",
            "workload.options.categories=[multi_turn_base]", "search.samples=1", "search.max_front_dev=1", "search.resamples=200",
            "search.models=[]", "search.teacher=sim_large", "model.route=openai/sim/small", f"model.api_base={api_base}",
            "model.api_key_env=SIM_HTTP_KEY", "model.send_episode_id=true", f"mutators.enabled={mutators}",
            "criteria.decision=best_quality"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "SIM_HTTP_KEY": "sk-local-simulator-key"}
    proc = subprocess.run([sys.executable, "-m", "evoharness.search", f"runs_dir={tmp_path}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    study = tmp_path / "leak"
    proposals = []
    for path in sorted(study.glob("pools/r*.json")):
        pools = json.loads(path.read_text(encoding="utf-8"))["pools"]
        for slot in [*pools["sections"].values(), *pools["tools"].values()]:
            proposals += [json.dumps(e["value"]) + " " + e.get("note", "") for e in slot if e["author"] != "baseline"]
        proposals += [json.dumps(e["value"]) for e in pools["steps"].values() if e["author"] != "baseline"]
    requests = [" ".join(str(m.get("content") or "") for m in b["messages"]) for b in bodies
                if "task_id=mutator/" in str(b.get("user", ""))]
    assert len(proposals) >= 5 and len(requests) >= 2, (len(proposals), len(requests))  # the mutators did run, and asked

    catalog = build_catalog({"source": "bfcl"})
    docs = " ".join([json.dumps(s.to_dict() if hasattr(s, "to_dict") else str(s)) for s in catalog.values()])
    docs += " ".join(Path(ROOT / "evoharness/conf/agent/bfcl_agent.yaml").read_text(encoding="utf-8").split())
    values = task_values(docs)
    assert len(values) >= 10  # the check has teeth: train gold holds many values no documentation does
    leaked = {v for v in values for text in proposals + requests if re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", text)}
    assert not leaked, f"task values reached a mutator's proposal or request: {sorted(leaked)[:10]}"
    # and the values were there to leak: the failure records the mutators read carry them
    seen = " ".join(json.dumps(e.get("failures", [])) for path in study.glob("evals/*.json")
                    for e in json.loads(path.read_text(encoding="utf-8")).get("evidence", []))
    assert {v for v in values if v in seen}, "no task value in the evidence: the check would prove nothing"
