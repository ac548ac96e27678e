"""Secrets through the whole product: a key of a known shape and a plain 40-character one, both from
the environment, through compile, evaluate, search, promote and the next compile. Afterwards a grep
of every file under the working folder (runs/, Hydra's saved configs and logs, the registry, the
cache) finds neither, and the markers that replaced them are there (so the values were in play)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

SHAPED = "sk-proj-abcdefghijklmnopqrstuvwx0123456789"
PLAIN = "Zq8rT5vW2xY7bN4mK9pL3sD6fG1hJ0aQwErTyUiO"
LITERAL = "Hk3mPq9vXz2Lw8Rt5Ny7Bc4Df6Gh1Jk0MnQsVuYa"  # a credential-named variable's value typed on the command line
ROLE = "agent.prompt_sections.role='You are the file agent of team ${oc.env:TEAM_TOKEN_PLAIN}.'"
TINY = [ONE_AT_A_TIME, "search.study=sec", "search.rounds=1", "search.trials_per_round=4", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]", "model=sim_small", "criteria.decision=best_quality",
        "search.population_size=2", "search.max_front_dev=2", "search.resamples=2000"]


def evoharness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "ROUTE_KEY": SHAPED, "TEAM_TOKEN_PLAIN": PLAIN,
           "EVO_SERVICE_PASSWORD": LITERAL}
    proc = subprocess.run([sys.executable, "-m", "evoharness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    for value in (SHAPED, PLAIN, LITERAL):
        assert value not in proc.stdout and value not in proc.stderr, proc.stderr[-2000:]
    return proc


def test_no_secret_value_lands_in_any_file(tmp_path: Path) -> None:
    common = ["model.api_key_env=ROUTE_KEY", ROLE, f"+agent.vars.ticket={LITERAL}", "cache_dir=runs/cache"]
    steps = [
        ["compile", *common],
        ["evaluate", *common, "workload.limit=3"],
        ["search", *common, *TINY],
    ]
    for argv in steps:
        proc = evoharness(tmp_path, *argv)
        assert proc.returncode == 0, (argv[0], proc.stderr[-2000:])
    champion = tmp_path / "runs" / "sec" / "champion.json"
    assert champion.exists()  # the bigger models beat sim_small on train even at this size
    # --force: what is tested is where secrets land, whatever the tiny search's verdict
    assert evoharness(tmp_path, "promote", str(champion), "--force").returncode == 0
    # the release re-reads the variable the champion's prompt came from: the same variant ships
    shipped = evoharness(tmp_path, "compile", *common)
    assert shipped.returncode == 0
    assert json.loads(champion.read_text(encoding="utf-8"))["provenance"]["variant_hash"] == shipped.stdout.split()[0]
    hits, markers = [], 0
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 50  # the run wrote its records, Hydra its configs and logs, the cache its entries
    for path in files:
        data = path.read_bytes()
        if path.name.endswith(".gz"):  # the transcripts: their system prompts carried the team's token
            data = gzip.decompress(data)
        hits += [f"{path.relative_to(tmp_path)}: {v[:6]}..." for v in (SHAPED, PLAIN, LITERAL) if v.encode() in data]
        markers += data.count(b"${oc.env:TEAM_TOKEN_PLAIN}") + data.count(b"${oc.env:EVO_SERVICE_PASSWORD}")
    assert hits == []
    assert markers > 0
    sidecars = list(tmp_path.rglob("*.transcripts.jsonl.gz"))  # evaluate's and the search's
    assert any("evaluate" in p.parts for p in sidecars) and any("evals" in p.parts for p in sidecars)
    assert all(b"${oc.env:TEAM_TOKEN_PLAIN}" in gzip.decompress(p.read_bytes()) for p in sidecars)
    prompts = list((tmp_path / "runs" / "compiled").glob("*/system_prompt.md"))
    assert prompts and all("team ${oc.env:TEAM_TOKEN_PLAIN}" in p.read_text(encoding="utf-8") for p in prompts)
    snapshots = list((tmp_path / "runs" / "registry" / "snapshots").glob("*.json"))
    assert snapshots and all(PLAIN.encode() not in p.read_bytes() for p in snapshots)
