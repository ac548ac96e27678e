"""workload=tasks: a JSONL tasks file and Python tool functions, no Workload class. Bad records are
one line naming the record; the default scorer emits structured failures; and the example under
examples/refunds runs through the CLI as a plugin: evaluate (the simulated model passes
answer-scored tasks from their reference text), the doctor, and a small search whose rule miner
reads this workload's failures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.runtime.trajectory import ToolCallRecord, Trajectory
from evoharness.compiler.workloads.tasks.workload import TasksFileWorkload, _hashed_split
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "refunds"
TOOLS = [f"refunds_shop.tools.{n}" for n in ("find_order", "order_status", "refund", "cancel_order")]

ALL_PASS = ("gates: every split has tasks PASS, gold replay passes PASS, do-nothing model fails PASS, deterministic PASS, "
            "final state scored PASS")


@pytest.fixture(autouse=True)
def example_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))


def write(tmp: Path, records: list[Any]) -> Path:
    path = tmp / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("record, expected", [
    ({"turns": ["x"]}, "record 1: the record: 'id' is a required property"),
    ({"id": "a/b", "turns": ["x"]}, "is not a plain name"),
    ({"id": "a", "turns": ["x"], "expected_calls": [[{"name": "rm_rf"}]]}, "not in workload.options.tools: ['rm_rf']"),
    ({"id": "a", "turns": ["x"], "colour": "red"}, "Additional properties are not allowed"),
    ({"id": "a", "turns": []}, "turns: [] should be non-empty"),
    ({"id": "a", "turns": ["x"], "answers": [""]}, "an empty reference answer checks nothing"),
    ({"id": "a", "turns": ["x"], "answers": ["a", "b"]}, "answers has 2 entries, the task 1 turns"),
    ({"id": "a", "turns": ["x"], "tools": ["nosuch_tool"]}, "tools names tools that are not in workload.options.tools"),
    ({"id": "a", "turns": ["x"], "cluster": 3}, "record 1: cluster: 3 is not of type 'string'"),
    ({"id": "a", "turns": ["x"], "cluster": ""}, "record 1: cluster: '' should be non-empty"),
])
def test_bad_records_are_one_line_naming_the_record(tmp_path: Path, record: Any, expected: str) -> None:
    with pytest.raises(ValueError) as err:
        TasksFileWorkload(path=str(write(tmp_path, [record])), tools=TOOLS)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_line_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "turns": ["x"]}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValueError, match="t.jsonl line 2: not JSON"):
        TasksFileWorkload(path=str(path), tools=TOOLS)


def test_unreadable_files_name_the_file(tmp_path: Path) -> None:
    binary = tmp_path / "t.jsonl"
    binary.write_bytes(b'{"id": "a", "turns": ["\xff"]}\n')
    with pytest.raises(ValueError, match="t.jsonl: not UTF-8 text"):
        TasksFileWorkload(path=str(binary), tools=TOOLS)
    broken = tmp_path / "t.yaml"
    broken.write_text("- id: a\n  turns: [x\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t.yaml line \d+: not valid YAML"):
        TasksFileWorkload(path=str(broken), tools=TOOLS)


def test_a_scorer_that_raises_or_returns_nonsense_stops_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.compiler.errors import ConfigError

    (tmp_path / "bad_scorers.py").write_text("def boom(task, traj, state):\n    raise RuntimeError('scorer exploded')\n"
                                             "def nan(task, traj, state):\n    return float('nan')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, why in [("boom", "raised RuntimeError: scorer exploded"), ("nan", "returned nan")]:
        w = TasksFileWorkload(path=str(EXAMPLE / "refunds_shop" / "tasks.jsonl"), tools=TOOLS, scorer=f"bad_scorers.{name}")
        task = w.task("tasks/status_2")
        with pytest.raises(ConfigError, match=why):
            w.score(task, trajectory(task.task_id, [], ["x"]), w.make_environment(task, seed=0))


def test_splits_are_declared_or_hashed_from_the_id_alone(tmp_path: Path) -> None:
    records = [{"id": f"t{i}", "turns": ["x"]} for i in range(200)] + [{"id": "pinned", "turns": ["x"], "split": "holdout"}]
    w = TasksFileWorkload(path=str(write(tmp_path, records)), tools=TOOLS)
    sizes = {s: len(w.tasks(s)) for s in ("train", "dev", "holdout")}
    assert sum(sizes.values()) == 201 and 95 <= sizes["train"] <= 145 and w.task("tasks/pinned").split == "holdout"
    more = TasksFileWorkload(path=str(write(tmp_path, [{"id": "new", "turns": ["y"]}, *records])), tools=TOOLS)
    assert all(more.task(t.task_id).split == t.split for s in ("train", "dev") for t in w.tasks(s))  # adding a task moves none
    assert _hashed_split("t1", {"train": 0.0, "dev": 0.0, "holdout": 1.0}, "s") == "holdout"


def test_a_task_names_its_cluster_or_is_its_own_and_a_cluster_is_hashed_into_one_split(tmp_path: Path) -> None:
    variants = [{"id": f"v{i}", "turns": ["x"], "cluster": "case_7"} for i in range(40)]
    records = [{"id": "case_7", "turns": ["x"]}, {"id": "lone", "turns": ["x"]}, *variants]
    w = TasksFileWorkload(path=str(write(tmp_path, records)), tools=TOOLS)
    assert w.task("tasks/v3").cluster == w.task("tasks/case_7").cluster == "tasks/case_7"  # naming a task's id joins it
    assert w.task("tasks/lone").cluster == "tasks/lone"
    assert {w.task(f"tasks/v{i}").split for i in range(40)} == {w.task("tasks/case_7").split}  # 40 variants, one split
    assert w.task("tasks/v0").split == _hashed_split("case_7", {"train": 0.6, "dev": 0.2, "holdout": 0.2}, "tasks-v1")


def test_a_cluster_declared_into_two_splits_is_one_line(tmp_path: Path) -> None:
    records = [{"id": "a", "turns": ["x"], "cluster": "c", "split": "train"},
               {"id": "b", "turns": ["x"], "cluster": "c", "split": "holdout"}]
    with pytest.raises(ValueError, match=r"tasks.jsonl: cluster 'c' spans two splits \(tasks/a in train, tasks/b in holdout\)"):
        TasksFileWorkload(path=str(write(tmp_path, records)), tools=TOOLS)


def test_an_unknown_split_is_refused_even_when_no_task_would_match(tmp_path: Path) -> None:
    w = TasksFileWorkload(path=str(write(tmp_path, [{"id": "only", "turns": ["x"], "split": "train"}])), tools=TOOLS)
    assert [t.task_id for t in w.tasks("train")] == ["tasks/only"] and w.tasks("dev") == []
    with pytest.raises(ValueError, match=r"^unknown split 'test'; use one of \['train', 'dev', 'holdout'\]$"):
        w.tasks("test")


def trajectory(task_id: str, calls: list[tuple[int, str, dict[str, Any]]], responses: list[str]) -> Trajectory:
    return Trajectory(task_id=task_id, sample=0, seed=0, variant_hash="v", status="completed", model_calls=(),
                      tool_calls=tuple(ToolCallRecord(turn=t, name=n, arguments=a, result="ok", error=None) for t, n, a in calls),
                      responses=tuple(responses), infra_error=None, final_state={})


def test_the_default_scorer_records_each_failure_in_kind_tool_argument() -> None:
    w = TasksFileWorkload(path=str(EXAMPLE / "refunds_shop" / "tasks.jsonl"), tools=TOOLS)
    task = w.task("tasks/cancel_1")
    gold = [(t, c.name, dict(c.arguments)) for t, turn in enumerate(task.gold) for c in turn]
    env = w.make_environment(task, seed=0)
    for _, name, args in gold:
        env.call(name, args)
    assert w.score(task, trajectory(task.task_id, gold, ["Cancelled.", "It is shipped."]), env).passed
    wrong = [(0, "find_order", gold[0][2]), (0, "cancel_order", {"order_id": "A-999"})]
    score = w.score(task, trajectory(task.task_id, wrong, ["Cancelled.", "no idea"]), w.make_environment(task, seed=0))
    kinds = {(f.kind, f.tool, f.argument) for f in score.failures}
    assert ("wrong_value", "cancel_order", "order_id") in kinds and ("missed_call", "order_status", None) in kinds
    assert ("wrong_answer", None, None) in kinds and ("wrong_state", None, "orders") in kinds and not score.passed


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(EXAMPLE)}
    return subprocess.run([sys.executable, "-m", "evoharness", *args,
                           f"runs_dir={tmp}", "plugins=[refunds_shop]", "workload=refunds", "agent=refunds_agent", "tool=refunds"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=900)


def test_the_example_evaluates_passes_the_doctor_and_searches(tmp_path: Path) -> None:
    proc = cli(tmp_path, "doctor")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ALL_PASS in proc.stdout
    proc = cli(tmp_path, "evaluate", "model=sim_large")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no `evoharness doctor` run" not in proc.stderr  # the doctor's record vouches for this workload
    [path] = list((tmp_path / "evaluate").rglob("eval.json"))
    report = json.loads(path.read_text(encoding="utf-8"))
    passed = {e["task_id"] for e in report["episodes"] if e["passed"]}
    assert report["metrics"]["pass_rate"] >= 0.5
    assert any(t.startswith("tasks/status_") for t in passed)  # scored on the final answer: the reference text came through
    args = [ONE_AT_A_TIME, "model=sim_large", "search.models=[sim_small]", "search.rounds=2", "search.trials_per_round=4",
            "search.population_size=2", "search.samples=1", "search.train_limit=19", "search.max_front_dev=2",
            "search.resamples=2000", "search.teacher=null", "mutators.enabled=[{name: rule_miner}]"]
    # 8 holdout tasks cannot tell "as good" from "0.05 worse": refused before anything is paid for
    refused = cli(tmp_path, "search", *args)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("error: criteria.margin: the holdout's 8 tasks cannot show non-inferiority within 0.05")
    assert "at least 73 tasks, or set criteria.margin=0.33 or wider" in refused.stderr and not (tmp_path / "tasks").exists()
    proc = cli(tmp_path, "search", *args, "search.allow_underpowered=true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    claim = json.loads((tmp_path / "tasks-refunds_agent" / "claim.json").read_text(encoding="utf-8"))
    kept = claim["champion_hash"] == claim["baseline_hash"]  # then nothing runs on the holdout: a claim on no task
    assert claim["underpowered"] is True and claim["clusters"] == claim["n"] == (0 if kept else 8) and claim["reach"] > 0.3
    assert "Underpowered" in proc.stdout
    rounds = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((tmp_path / "tasks-refunds_agent" / "pools").glob("r*.json"))]
    mined = [e for rp in rounds for kind in ("sections", "tools") for slot in rp["pools"][kind].values() for e in slot
             if e["author"] == "rule_miner"]
    # rules for this workload's own tools, mined from its structured failures (its detail text is its own wording)
    assert mined and any(t in json.dumps(e["value"]) for e in mined for t in ("find_order", "refund", "cancel_order", "order_status"))


def tasks_cli(tmp: Path, tasks: list[Any], *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (tmp / "leaky_tools.py").write_text(
        'import os\n\ndef leak(x: str) -> str:\n    """Calls a service that fails.\n\n    Args:\n        x: anything\n    """\n'
        '    raise RuntimeError("auth failed for key " + os.environ["OPENAI_API_KEY"])\n', encoding="utf-8")
    path = write(tmp, tasks)
    full = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(tmp), **(env or {})}
    return subprocess.run([sys.executable, "-m", "evoharness", *args,
                           f"runs_dir={tmp / 'runs'}", "workload.name=tasks", "~workload.options.categories", "tool.source=null",
                           "tool.callables=[leaky_tools.leak]", "agent.tools=[leak]", f"+workload.options.path={path}",
                           "+workload.options.tools=[leaky_tools.leak]"], cwd=tmp, env=full, capture_output=True, text=True, timeout=300)


def test_a_non_string_cluster_stops_evaluate_with_one_line(tmp_path: Path) -> None:
    records = [{"id": f"t{i}", "split": s, "turns": ["go"]} for i, s in enumerate(("train", "dev", "holdout"))]
    proc = tasks_cli(tmp_path, [*records, {"id": "odd", "turns": ["go"], "cluster": ["x"]}], "evaluate")
    line = "error: workload.options: " + str(tmp_path / "tasks.jsonl") + " record 4: cluster: ['x'] is not of type 'string'."
    assert proc.returncode == 2 and proc.stderr.startswith(line) and proc.stderr.count("\n") == 1, proc.stderr


def test_an_empty_split_is_one_line_and_the_doctor_masks_secrets(tmp_path: Path) -> None:
    only_train = [{"id": f"t{i}", "split": "train", "turns": ["go"], "expected_calls": [[{"name": "leak", "arguments": {"x": "a"}}]]}
                  for i in range(3)]
    proc = tasks_cli(tmp_path, only_train, "evaluate")
    assert proc.returncode == 2 and "workload.split: workload 'tasks' has no dev tasks" in proc.stderr, proc.stderr
    proc = tasks_cli(tmp_path, only_train, "search", "workload.split=train")
    assert proc.returncode == 2 and "has no dev or holdout tasks" in proc.stderr, proc.stderr
    key = "sk-zyxwvutsrqponmlkjihgfedcba9876543210ZYXW"
    spread = [{**t, "split": s} for t, s in zip(only_train, ("train", "dev", "holdout"))]
    proc = tasks_cli(tmp_path, spread, "doctor", env={"OPENAI_API_KEY": key})
    assert proc.returncode == 1 and "gold replay failed: tasks/t0: leak: RuntimeError: auth failed for key" in proc.stdout
    assert key not in proc.stdout + proc.stderr and "${oc.env:OPENAI_API_KEY}" in proc.stdout
    assert not any(key in p.read_text(encoding="utf-8") for p in (tmp_path / "runs").rglob("*") if p.is_file())
