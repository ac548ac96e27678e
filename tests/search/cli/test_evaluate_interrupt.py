"""Ctrl-C during `evoharness evaluate` stops new episodes, lets those in flight finish, and writes a
record of what ran, marked partial, with one line saying so: no traceback, nothing paid for lost."""
from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a whole evaluation in its own process: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[3]


def test_ctrl_c_writes_a_partial_record_of_what_ran(tmp_path: Path) -> None:
    err = tmp_path / "stderr.txt"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with err.open("w") as fh:
        # SIGINT as a terminal delivers it: a child of a shell's background job would inherit it ignored
        proc = subprocess.Popen([sys.executable, "-m", "evoharness", "evaluate", f"runs_dir={tmp_path}", "cache_dir=null",
                                 "workload.split=train"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=fh,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.time() + 120
        while time.time() < deadline and not re.search(r"\| *[1-9]\d*/\d+ \[", err.read_text(errors="replace")):
            time.sleep(0.2)  # until the first episode has ended
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    text = err.read_text(errors="replace")
    assert code == 1 and "Traceback" not in text, text[-3000:]
    assert "stopping: the episodes in flight finish" in text
    [line] = [x for x in text.replace("\r", "\n").splitlines() if x.startswith("error: ")]
    ran, total = map(int, re.search(r"stopped by Ctrl-C after (\d+) of (\d+) episodes", line).groups())  # type: ignore[union-attr]
    assert 1 <= ran < total == 318 and "marked partial" in line
    [record] = list(tmp_path.rglob("eval.json"))
    d = json.loads(record.read_text())
    assert d["partial"] is True and len(d["episodes"]) == ran  # every episode that ran is kept
    sidecar = record.with_name("eval.transcripts.jsonl.gz")
    assert gzip.decompress(sidecar.read_bytes()).count(b"\n") == ran
