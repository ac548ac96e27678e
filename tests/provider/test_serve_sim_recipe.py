"""The README's recipe for the simulator over HTTP works as written, and its figures equal the
in-process route's. The two commands are read from the README itself: a real ``serve-sim`` process,
then ``evaluate`` reaching it through litellm's ``openai/`` route."""
from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["workload.limit=3", "workload.samples=2", "model.temperature=0.7"]


def recipe() -> tuple[list[str], dict[str, str], list[str]]:
    """(serve-sim's argv, evaluate's environment assignments, evaluate's argv) from the README."""
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if "serve-sim" in b)
    serve, evaluate = [shlex.split(line.rstrip(" &")) for line in block.strip().splitlines()]
    env = dict(w.split("=", 1) for w in evaluate if re.fullmatch(r"[A-Z_]+=.*", w))
    return serve, env, [w for w in evaluate if not re.fullmatch(r"[A-Z_]+=.*", w)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "evoharness"
    return subprocess.run([sys.executable, "-m", "evoharness", *argv[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})


def metrics(folder: Path) -> dict[str, float]:
    (found,) = folder.rglob("eval.json")
    return json.loads(found.read_text())["metrics"]


def test_the_readme_recipe_equals_the_in_process_route(tmp_path: Path) -> None:
    serve, env, evaluate = recipe()
    port = str(free_port())
    serve = [port if w == "8765" else w for w in serve]
    evaluate = [w.replace(":8765/", f":{port}/") for w in evaluate]
    server = subprocess.Popen([sys.executable, "-m", "evoharness", *serve[1:]], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + 120
        line = server.stdout.readline()  # the server prints its endpoint once it listens
        assert f":{port}/v1" in line and time.monotonic() < deadline, line
        over_http = cli([*evaluate, *SMALL, f"runs_dir={tmp_path / 'http'}", "cache_dir=null"], tmp_path, env)
        assert over_http.returncode == 0, over_http.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
    in_process = cli(["evoharness", "evaluate", "model=sim_small", *SMALL, f"runs_dir={tmp_path / 'local'}", "cache_dir=null"],
                     tmp_path, {})
    assert in_process.returncode == 0, in_process.stderr
    http, local = metrics(tmp_path / "http"), metrics(tmp_path / "local")
    assert http["episodes"] == 6 and http["skipped"] == 0 and http["cost_total"] > 0
    assert http == local  # every metric: quality, cost, tokens, latency (the provider's own clock)
