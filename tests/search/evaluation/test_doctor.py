"""`evoharness doctor` on a small workload written here, sound and then broken one way at a time.
Every gate must be able to fail. Then the command on BFCL through the CLI, and the warning
evaluate gives for a workload nobody checked."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.runtime.trajectory import ToolCall, Trajectory
from evoharness.compiler.runtime.workload import EpisodeScore, Task
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.variant import HarnessVariant
from evoharness.search.evaluation.doctor import run_doctor

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
SPECS = (ToolSpec("read_x", "Read the stored number.", {"type": "object", "properties": {}}),
         ToolSpec("write_y", "Store a number as y.", {"type": "object", "properties": {"value": {"type": "integer"}},
                                                      "required": ["value"]}, mutates_state=True))


@dataclass
class Env:
    x: int
    y: int | None = None
    turn: int = 0

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name == "read_x":
            return str(self.x)
        self.y = int(arguments["value"])
        return "stored"

    def end_turn(self, turn: int) -> None:
        self.turn = turn + 1

    def snapshot(self) -> Mapping[str, Any]:
        return {"x": self.x, "y": self.y}


@dataclass
class Toy:
    """Copy x into y. ``flaw`` breaks one thing: lenient (the scorer ignores the state), random
    (the start state ignores the seed), bad_gold (the reference call breaks its own schema)."""

    flaw: str = ""
    name: str = "toy"
    calls: list[str] = field(default_factory=list)

    def tool_specs(self) -> Sequence[ToolSpec]:
        return SPECS

    def tasks(self, split: str) -> Sequence[Task]:
        return [self.task(f"toy/{split}_{i}") for i in range(3)]

    def task(self, task_id: str) -> Task:
        i = int(task_id.rsplit("_", 1)[1])
        value: Any = "seven" if self.flaw == "bad_gold" else 7 + i
        return Task(task_id=task_id, split=task_id.split("/")[1].split("_")[0], turns=(({"role": "user", "content": "Copy x to y."},),),
                    tool_names=("read_x", "write_y"), gold=((ToolCall("read_x", {}), ToolCall("write_y", {"value": value})),),
                    data={"x": 7 + i})

    def make_environment(self, task: Task, *, seed: int) -> Env:
        return Env(x=random.randint(0, 10**9) if self.flaw == "random" else int(task.data["x"]))

    def score(self, task: Task, trajectory: Trajectory, environment: Any) -> EpisodeScore:
        ok = self.flaw == "lenient" or environment.y == environment.x
        return EpisodeScore(passed=ok, score=float(ok), detail="" if ok else f"y={environment.y}, want {environment.x}")


@pytest.fixture(scope="module")
def variant() -> HarnessVariant:
    """The example agent's harness over the toy's tools (a tool catalog registered by name)."""
    from hydra import compose, initialize_config_dir

    from evoharness.compiler.catalog import CATALOGS, register_tool_catalog
    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR

    if "toy" not in CATALOGS:
        register_tool_catalog("toy")(lambda: SPECS)
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["tool.source=toy", "agent.tools=[read_x,write_y]"])
    return compile_config(cfg)


def doctor(variant: HarnessVariant, flaw: str = "") -> Any:
    w = Toy(flaw)
    return run_doctor(variant, w, [t for s in ("train", "dev", "holdout") for t in w.tasks(s)])


def test_a_sound_workload_passes_every_gate(variant: HarnessVariant) -> None:
    report = doctor(variant)
    assert report.gates() == {"every split has tasks": True, "gold replay passes": True, "do-nothing model fails": True,
                              "deterministic": True, "final state scored": True} and report.passed
    rows = {r["split"]: r for r in report.split_rows()}
    assert rows["dev"]["gold_passed"] == 3 and rows["dev"]["null_pass_rate"] == 0.0 and rows["dev"]["state_checked"] == 3


@pytest.mark.parametrize("flaw, gate", [("lenient", "final state scored"), ("lenient", "do-nothing model fails"),
                                        ("random", "deterministic"), ("bad_gold", "gold replay passes")])
def test_each_flaw_fails_its_gate(variant: HarnessVariant, flaw: str, gate: str) -> None:
    report = doctor(variant, flaw)
    assert report.gates()[gate] is False and not report.passed
    if flaw == "lenient":  # a scorer that passes doing nothing shows in the do-nothing pass rate
        assert all(r["null_pass_rate"] == 1.0 for r in report.split_rows())
    if flaw == "bad_gold":  # the loop rejected the reference call its own schema forbids, and says why
        assert "is not of type 'integer'" in report.failures()[0]
        assert report.gates()["final state scored"] is None  # a failing replay's truncation proves nothing


def test_a_missing_split_fails_and_a_gate_nothing_tests_is_not_a_pass(variant: HarnessVariant) -> None:
    w = Toy()
    report = run_doctor(variant, w, [*w.tasks("train"), *w.tasks("dev")])
    assert report.gates()["every split has tasks"] is False and not report.passed
    reads_only = [replace(t, gold=((ToolCall("read_x", {}),),)) for t in w.tasks("train")]  # no turn writes
    assert run_doctor(variant, w, reads_only).gates()["final state scored"] is None


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "evoharness", *args,
                           f"runs_dir={tmp}", "workload.options.categories=[multi_turn_base]", "model=sim_small"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_doctor_on_bfcl_writes_its_record_and_evaluate_reads_it(tmp_path: Path) -> None:
    before = cli(tmp_path, "evaluate", "workload.limit=2")
    assert before.returncode == 0 and "has no `evoharness doctor` run" in before.stderr
    # a harness too tight for the gold: two replies a turn cannot replay a reference that needs more
    proc = cli(tmp_path, "doctor", "workload.limit=4", "agent.max_turns=2")
    [path] = list((tmp_path / "doctor").glob("bfcl-*.json"))
    record = json.loads(path.read_text(encoding="utf-8"))
    assert proc.returncode == 1 and record["passed"] is False, proc.stdout[-2000:] + proc.stderr[-2000:]
    failed = [line for line in proc.stdout.splitlines() if line.startswith("  gold replay failed: ")]
    assert failed and all("agent.max_turns=2 model calls per turn cut the replay short" in line for line in failed)
    assert len(failed) == 12 - sum(r["gold_passed"] for r in record["splits"])  # every failure listed, none left out
    assert [r["split"] for r in record["splits"]] == ["train", "dev", "holdout"] and record["tasks_checked"] == 12
    assert record["tasks_total"] == 199 and "gates: every split has tasks PASS, gold replay passes FAIL" in proc.stdout  # 173 left out
    # and whether the splits can answer the default question: 81 holdout scenarios bound a 0.05 margin
    assert "power (cheapest_noninferior): holdout 81 clusters of 81 tasks, interval reach 0.045 against margin 0.05" in proc.stdout
    after = cli(tmp_path, "evaluate", "workload.limit=2", "agent.max_turns=2")
    assert after.returncode == 0 and "failed its last `evoharness doctor` run" in after.stderr
    # two scenarios a split: a check of half the tasks does not vouch for all of them
    sample = cli(tmp_path, "doctor", "workload.limit=1", "+workload.options.limit_per_split=2")
    assert sample.returncode == 0, sample.stdout[-2000:]
    partial = cli(tmp_path, "evaluate", "workload.limit=1", "+workload.options.limit_per_split=2")
    assert "passed `evoharness doctor` on 3 of its 6 tasks only" in partial.stderr
    assert cli(tmp_path, "doctor", "+workload.options.limit_per_split=2").returncode == 0
    whole = cli(tmp_path, "evaluate", "workload.limit=1", "+workload.options.limit_per_split=2")
    assert whole.returncode == 0 and "warning" not in whole.stderr
    # another workload option is another workload: the record does not vouch for it (nor does the
    # one the package ships, which is of the default categories only)
    other = subprocess.run([sys.executable, "-m", "evoharness", "evaluate", f"runs_dir={tmp_path}", "workload.limit=1", "model=sim_small",
                            "workload.options.categories=[multi_turn_base,multi_turn_miss_func]"], cwd=ROOT,
                           env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, capture_output=True, text=True, timeout=600)
    assert "the last one checked other tasks, scorer or agent tools" in other.stderr
    narrower = cli(tmp_path, "evaluate", "workload.limit=1", "agent.tools=[ls,cd,mv]")  # another harness: not vouched for
    assert "the last one checked other tasks, scorer or agent tools" in narrower.stderr


def test_each_task_bfcl_leaves_out_fails_its_replay_for_the_reason_given() -> None:
    from hydra import compose, initialize_config_dir

    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.schema import register_configs
    from evoharness.compiler.workloads.bfcl.workload import CATEGORIES, EXCLUDED, BfclWorkload
    from evoharness.conf import CONF_DIR
    from evoharness.search.cli.main import hydra_commands  # noqa: F401  (registers the config schema)

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        variant = compile_config(compose(config_name="config"))  # the example agent, as the doctor replays it
    workload = BfclWorkload(categories=CATEGORIES)
    assert not {t.task_id for s in ("train", "dev", "holdout") for t in workload.tasks(s)} & set(EXCLUDED)
    report = run_doctor(variant, workload, [workload.task(t) for t in EXCLUDED])
    failures = dict(line.split(": ", 1) for line in report.failures())
    assert sorted(failures) == sorted(EXCLUDED)  # each fails: the list hides nothing that would pass
    why = {"173": "'ticket_001' is not of type 'integer'", "miss_func_49": "unknown tool 'tail'",
           "long_context_38": "agent.max_turns=12 model calls per turn cut the replay short",
           "long_context_46": "agent.max_turns=12 model calls per turn cut the replay short"}
    for task, detail in failures.items():
        assert next(v for k, v in why.items() if task.endswith(k)) in detail, (task, detail)


def test_the_shipped_bfcl_record_vouches_for_the_default_config_only(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.runtime.workload import shipped_doctor_record
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.cli.commands import make_workload, workload_options
    from evoharness.search.cli.main import hydra_commands  # noqa: F401  (registers the config schema)
    from evoharness.search.records.doctor_record import workload_hash

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config")
    variant, workload = compile_config(cfg), make_workload(cfg)
    shipped = shipped_doctor_record(workload)
    assert shipped is not None
    record = json.loads(shipped.read_text(encoding="utf-8"))
    digest = workload_hash(workload, workload_options(cfg), tools=[t.name for t in variant.tools], max_turns=variant.max_turns)
    assert record["workload_hash"] == digest, (
        "the BFCL doctor record shipped with the package is of other tasks, scorer code or agent limits: run `evoharness doctor` "
        f"on the default config and copy its runs/doctor/bfcl-*.json over {shipped}")
    total = sum(len(workload.tasks(s)) for s in ("train", "dev", "holdout"))
    assert record["passed"] is True and record["tasks_checked"] == record["tasks_total"] == total
    assert all(record["gates"].values()) and all(r["gold_passed"] == r["tasks"] for r in record["splits"])
    # through the command: the default config starts with no warning on a machine that never ran the doctor
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    fresh = subprocess.run([sys.executable, "-m", "evoharness", "evaluate", f"runs_dir={tmp_path}", "workload.limit=1"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0 and "warning" not in fresh.stderr, fresh.stderr[-2000:]


def test_a_shipped_record_counts_for_its_own_hash_and_never_over_a_run_here(tmp_path: Path) -> None:
    from evoharness.search.records.doctor_record import record_path, status, warning, write_record

    digest, other = "d" * 64, "e" * 64
    shipped = tmp_path / "shipped.json"
    rows: list[dict[str, Any]] = []
    write_record(shipped, workload="bfcl", digest=digest, passed=True, gates={"gold replay passes": True}, rows=rows,
                 checked=793, total=793)
    runs = tmp_path / "runs"
    vouched = status(runs, "bfcl", lambda: digest, shipped=shipped)
    assert vouched["passed"] is True and vouched.get("shipped") is True and warning(vouched, "bfcl") is None
    assert status(runs, "bfcl", lambda: digest)["passed"] is None  # without it: never checked
    assert status(runs, "bfcl", other, shipped=shipped)["passed"] is None  # another workload or harness
    assert status(runs, "tasks", digest, shipped=shipped)["passed"] is None  # another workload's name
    write_record(record_path(runs, "bfcl", digest), workload="bfcl", digest=digest, passed=False, gates={}, rows=rows,
                 checked=793, total=793)
    assert status(runs, "bfcl", digest, shipped=shipped)["passed"] is False  # a failed run here is not overruled
    record_path(runs, "bfcl", digest).write_text("{", encoding="utf-8")
    assert status(runs, "bfcl", digest, shipped=shipped)["passed"] is None  # nor a damaged one
    for forged in ({"passed": False}, {"schema_version": 99}, {"workload_hash": other}):
        body = json.loads(shipped.read_text(encoding="utf-8"))
        (tmp_path / "forged.json").write_text(json.dumps({**body, **forged}), encoding="utf-8")
        assert status(tmp_path / "elsewhere", "bfcl", digest, shipped=tmp_path / "forged.json")["passed"] is None, forged
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    assert status(tmp_path / "elsewhere", "bfcl", digest, shipped=tmp_path / "broken.json")["passed"] is None
    assert status(tmp_path / "elsewhere", "bfcl", digest, shipped=tmp_path / "missing.json")["passed"] is None
