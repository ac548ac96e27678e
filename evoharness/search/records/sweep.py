"""The end of a config-override sweep (`evoharness evaluate -m ...`): one table across its jobs.

A Hydra callback (``on_multirun_end``), so it runs on any launcher once every job is done: it
reads each job's ``eval.json`` and ``.hydra/overrides.yaml`` under the sweep dir, prints one row
per variant with the Pareto members over quality, cost and latency marked, and writes
``sweep_summary.json`` and ``sweep_summary.csv`` beside the jobs (rewritten after every job, so a
job that fails and stops the sweep leaves the files for the jobs that ran). Jobs that left no
eval.json (they failed) are listed as failed, never dropped.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.atomic import write_json_atomic, write_text_atomic
from evoharness.search.records.format import UNPRICED, fmt_metric
from evoharness.search.records.versions import versioned

COLUMNS = ("pass_rate", "cost_per_task", "latency_p95", "tokens_per_task", "skipped")
# quality up, cost and latency down: the same objectives the search's default criteria use
OBJECTIVES = (("pass_rate", 1.0), ("cost_per_task", -1.0), ("latency_p95", -1.0))


def pareto(rows: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Whether each row is on the front (no other row at least as good everywhere, better once)."""
    def dominates(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        pairs = [(sign * a[k], sign * b[k]) for k, sign in OBJECTIVES]
        return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)

    usable = [all(isinstance(r.get(k), int | float) for k, _ in OBJECTIVES) for r in rows]
    return [ok and not any(o and dominates(other, row) for other, o in zip(rows, usable)) for row, ok in zip(rows, usable)]


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One entry per job dir (a numbered subdir), in job order."""
    out: list[dict[str, Any]] = []
    jobs = sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    per_job = {}
    for job in jobs:
        overrides_file = job / ".hydra" / "overrides.yaml"
        per_job[job] = [str(o) for o in OmegaConf.load(overrides_file)] if overrides_file.exists() else []
    # a variant is named by what sets it apart: overrides every job shares are left out of its label
    shared = set.intersection(*(set(o) for o in per_job.values())) if len(per_job) > 1 else set()
    for job in jobs:
        overrides = per_job[job]
        label = " ".join(o for o in overrides if not o.startswith("hydra.") and o not in shared) or "(base config)"
        record = job / "eval.json"
        if not record.exists():
            out.append({"job": int(job.name), "variant": label, "overrides": overrides, "status": "failed", "metrics": {}})
            continue
        data = json.loads(record.read_text(encoding="utf-8"))
        # the record of a run that skipped more episodes than it allows is kept, and the run failed
        allowed = ((data.get("config") or {}).get("workload") or {}).get("max_skip_rate", 1.0)
        failed = float(data["metrics"].get("skipped_rate", 0.0)) > float(allowed)
        out.append({"job": int(job.name), "variant": label, "overrides": overrides, "status": "failed" if failed else "ok",
                    "variant_hash": data["variant_hash"],
                    "split": data["split"], "priced": data.get("priced", True), "release": data.get("release"),
                    "metrics": {k: data["metrics"].get(k) for k in COLUMNS}})
    front = pareto([r["metrics"] if r["status"] == "ok" else {} for r in out])
    for r, on in zip(out, front):
        r["pareto"] = on
    return out


def job_line(num: int, overrides: Sequence[str], metrics: Mapping[str, Any], *, priced: bool = True) -> str:
    """What one finished job of a sweep prints: its overrides and the table's columns, on one line
    (the table across every job comes at the end)."""
    label = " ".join(o for o in overrides if not o.lstrip("+~").startswith("hydra.")) or "(base config)"
    figures = ", ".join(f"{k} {fmt_metric(metrics.get(k), k, missing=UNPRICED if k.startswith('cost') and not priced else '-')}"
                        for k in COLUMNS)
    return f"job {num} done ({label}): {figures}"


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ["", "variant", *COLUMNS]
    body = [["*" if r["pareto"] else ("x" if r["status"] == "failed" else ""), str(r["variant"]),
             *(fmt_metric(r["metrics"].get(k), k, missing=UNPRICED if k.startswith("cost") and r.get("priced") is False else "-")
               for k in COLUMNS)] for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *body]]
    releases = sorted({(r["release"]["component"], r["release"]["slot"], r["release"]["snapshot"][:12])
                       for r in rows if isinstance(r.get("release"), Mapping)})
    on = [f"evaluated on the promoted release: slot {slot} of {comp} is snapshot {snap}; each job's overrides apply on top "
          "of it (release_slot=null evaluates the base config)" for comp, slot, snap in releases]
    return "\n".join(lines + ["* on the Pareto front (pass_rate up, cost_per_task and latency_p95 down; an unpriced variant is on "
                               "no front); x failed", *on])


def write(sweep_dir: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_json_atomic(sweep_dir / "sweep_summary.json", versioned("sweep_summary", {"jobs": list(rows)}))
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["job", "variant", "status", "pareto", *COLUMNS])
    for r in rows:
        writer.writerow([r["job"], r["variant"], r["status"], r["pareto"], *(r["metrics"].get(k, "") for k in COLUMNS)])
    write_text_atomic(sweep_dir / "sweep_summary.csv", buf.getvalue())


class SweepSummary(Callback):
    """Registered for `evoharness evaluate -m` (hydra.callbacks.sweep_summary). The files are
    rewritten after every job, so a sweep that a failed job stops (Hydra re-raises its error before
    the multirun ends) still leaves the comparison of every job that ran, the failed one marked."""

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        try:
            sweep_dir = Path(str(config.hydra.sweep.dir))
        except Exception:  # a config without its hydra node: the multirun end still writes the files
            return
        if sweep_dir.is_dir() and (rows := collect(sweep_dir)):
            write(sweep_dir, rows)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        rows = collect(sweep_dir)
        if not rows:
            return
        write(sweep_dir, rows)
        print(table(rows))
        print(f"sweep summary: {sweep_dir / 'sweep_summary.json'} and .csv")
