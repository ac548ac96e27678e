"""A plugin named by plugins=[...] is seen by every lookup: a model config it brings works in
search.models (a real search through the CLI), and serve-sim (a real server process) answers a
request for one of its workload's tasks, which it refuses without the plugin."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.runs import ONE_AT_A_TIME

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "refunds"
PLUGIN = '''"""A plugin that brings a model config and a workload of its own."""
from pathlib import Path

from evoharness.compiler.workloads.tasks.workload import TasksFileWorkload
from evoharness.plugin import register_workload

CONFIG_DIR = Path(__file__).parent / "conf"
TOOLS = [f"refunds_shop.tools.{n}" for n in ("find_order", "order_status", "refund", "cancel_order")]


@register_workload("minidesk")
class MiniDesk(TasksFileWorkload):
    name = "minidesk"

    def __init__(self, **options):
        super().__init__(path=str(Path(__file__).parent / "tasks.jsonl"), tools=TOOLS, **options)
'''


@pytest.fixture()
def plugin(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "minidesk"
    (package / "conf" / "model").mkdir(parents=True)
    (package / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    (package / "tasks.jsonl").write_text((EXAMPLE / "refunds_shop" / "tasks.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    (package / "conf" / "model" / "desk_small.yaml").write_text("defaults:\n  - sim_small\n  - _self_\nmax_tokens: 333\n",
                                                                 encoding="utf-8")
    return tmp_path / "site"


def env(site: Path) -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": f"{site}{os.pathsep}{EXAMPLE}"}


def test_a_plugins_model_config_is_a_search_model(tmp_path: Path, plugin: Path) -> None:
    args = [sys.executable, "-m", "evoharness", "search", ONE_AT_A_TIME, f"runs_dir={tmp_path / 'runs'}", "cache_dir=null",
            "workload=refunds", "agent=refunds_agent", "tool=refunds", "model=sim_large", "search.models=[desk_small]",
            "search.rounds=1", "search.trials_per_round=2", "search.population_size=2", "search.samples=1",
            "search.allow_underpowered=true", "search.teacher=null"]
    without = subprocess.run([*args, "plugins=[refunds_shop]"], cwd=tmp_path, env=env(plugin), capture_output=True, text=True,
                             timeout=600)
    assert without.returncode == 2 and "no model config named 'desk_small'" in without.stderr, without.stderr[-2000:]
    proc = subprocess.run([*args, "plugins=[refunds_shop,minidesk]"], cwd=tmp_path, env=env(plugin), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    frozen = json.loads((tmp_path / "runs" / "tasks-refunds_agent" / "freeze.json").read_text(encoding="utf-8"))
    assert frozen["resolved_config"]["search"]["models"] == ["desk_small"]
    pools = json.loads((tmp_path / "runs" / "tasks-refunds_agent" / "pools" / "r0.json").read_text(encoding="utf-8"))
    assert "desk_small" in json.dumps(pools)  # the plugin's model is one the search may choose


@pytest.fixture()
def serve(plugin: Path) -> Iterator[Callable[..., str]]:
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> str:
        proc = subprocess.Popen([sys.executable, "-m", "evoharness", "serve-sim", "--port", "0", "--time-scale", "0", *extra],
                                env=env(plugin), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("sim endpoint: http://127.0.0.1:"), line + (proc.stderr.read() if proc.stderr else "")
        return line.split()[2]

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


def ask(api_base: str, task_id: str) -> tuple[int, dict]:
    from evoharness.compiler.callables import callable_tools

    specs = [spec for spec, _ in callable_tools([f"refunds_shop.tools.{n}" for n in ("find_order", "refund")]).values()]
    body = {"model": "sim/small", "temperature": 0, "user": f"task_id={task_id}",
            "messages": [{"role": "system", "content": "You are the order desk."},
                         {"role": "user", "content": "Hi, I'm ana0@example.com. My lamp order arrived late; please refund it in full."}],
            "tools": [{"type": "function", "function": {"name": s.name, "description": s.description, "parameters": dict(s.parameters)}}
                      for s in specs]}
    req = urllib.request.Request(f"{api_base}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_sim_answers_a_plugin_workloads_task(serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    status, body = ask(serve(), "minidesk/refund_0")
    assert status == 400 and "minidesk" in body["error"]["message"], body  # the plugin not loaded: no such workload
    status, body = ask(serve("plugins=[minidesk]"), "minidesk/refund_0")
    assert status == 200, body
    calls = body["choices"][0]["message"].get("tool_calls") or []
    assert calls and calls[0]["function"]["name"] == "find_order"  # the simulator read the plugin task's gold


def test_serve_sim_names_a_plugin_it_cannot_import(plugin: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evoharness", "serve-sim", "--port", "0", "plugins=[no_such_plugin]"],
                          env=env(plugin), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: plugins[0]: cannot import plugin 'no_such_plugin'")
