"""One search per study at a time: a second process on the same study exits 2 at once with one line
naming the holder's pid, changes nothing, and the first finishes clean."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.optimise.lock import OWNER_FILE, study_lock
from evoharness.search.optimise.study import distinct_evaluations
from tests.runs import ONE_AT_A_TIME

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]
ARGS = [ONE_AT_A_TIME, "search.study=both", "search.rounds=1", "search.trials_per_round=4", "mutators.enabled=[]", "search.train_limit=6",
        "workload.options.categories=[multi_turn_base]",
        "search.samples=1", "search.population_size=2", "search.max_front_dev=2", "search.resamples=2000"]


def test_the_lock_names_its_holder_and_is_released(tmp_path: Path) -> None:
    with study_lock(tmp_path / "s", "s"):
        assert (tmp_path / "s" / OWNER_FILE).read_text().strip() == str(os.getpid())
        probe = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path\n"
                                "from evoharness.search.optimise.lock import study_lock\n"
                                f"with study_lock(Path({str(tmp_path / 's')!r}), 's'): pass"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and f"being searched by process {os.getpid()}" in probe.stderr
    assert not (tmp_path / "s" / OWNER_FILE).exists()
    with study_lock(tmp_path / "s", "s"):  # released: taken again at once
        pass


def test_a_second_holder_in_the_same_process_is_refused(tmp_path: Path) -> None:
    with study_lock(tmp_path / "s", "s"):
        with pytest.raises(ConfigError, match="is being searched by process"):
            with study_lock(tmp_path / "s", "s"):
                pass


def test_two_searches_on_one_study(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "evoharness", "search", f"runs_dir={tmp_path}", *ARGS]
    first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    owner = tmp_path / "both" / OWNER_FILE
    deadline = time.time() + 120
    while not owner.exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.2)
    assert owner.exists(), "the first search never took the study's lock"
    # the first is paused while the second runs: it still holds the lock, however slow the second's
    # start on a loaded machine, and a second that waited for the lock instead of exiting would time out
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == 2, second.stderr[-2000:]
    assert second.stderr.count("\n") == 1, second.stderr
    assert f"search.study: study 'both' is being searched by process {first.pid}" in second.stderr
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    study = optuna.load_study(study_name="both/r0", storage=f"sqlite:///{tmp_path / 'both' / 'study.db'}")
    assert distinct_evaluations(study) == 4 and not [t for t in study.trials if t.state.name in ("RUNNING", "FAIL")]
    assert not owner.exists()



def test_two_searches_through_one_sqlite_file_from_two_output_folders(tmp_path: Path) -> None:
    """The folder lock guards one output folder; a SQLite file named by search.storage can be shared by
    two: the file is locked beside itself, so the second orchestrator is refused before it runs a trial."""
    db = tmp_path / "shared" / "study.db"
    db.parent.mkdir()
    url = f"sqlite:///{db}"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from evoharness.search.optimise.lock import storage_lock\n"
                               f"with storage_lock({url!r}, 'both'):\n    print('held', flush=True); time.sleep(120)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        second = subprocess.run([sys.executable, "-m", "evoharness", "search",
                                 f"runs_dir={tmp_path / 'other'}", *ARGS, f"search.storage='{url}'"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr[-2000:]
    assert f"through the study database {db} by process {holder.pid}" in second.stderr
    assert not list((tmp_path / "other").rglob("eval.json")) and not list((tmp_path / "other").rglob("evals*"))
