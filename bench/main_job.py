"""The README's main job at default settings: how long it takes and what it answers.

Runs ``evoharness search`` (every default: BFCL with three categories, the sim_large incumbent,
the cheapest_noninferior decision) in a fresh runs dir and prints its wall time, the decision
rule, the verdict, the shipped (or proposed) variant and its holdout cost relative to the
incumbent, and the share of the champion's dev gain over its own model with the base harness that
the mutators' edits earned (the search's own sequential ablation), and what the search spent.
Target: at most 6 minutes on 2 cores. ``search.seed=N`` repeats it with another seed.

    python bench/main_job.py [overrides...]     # ~6 min; overrides go to the search command
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, figure

TARGET_S = 360.0


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    runs = Path(tempfile.mkdtemp(prefix="main-job-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evoharness.search", f"runs_dir={runs}", *overrides], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    figure("main_job_wall_s", round(seconds, 1), f"<= {TARGET_S:.0f}", seconds <= TARGET_S and proc.returncode == 0,
           exit_code=proc.returncode)
    summaries = sorted(runs.glob("*/summary.json"))
    if proc.returncode != 0 or not summaries:
        print(f"main job failed: {proc.stderr.strip().splitlines()[-1:]}")
        return 0
    summary = json.loads(summaries[0].read_text(encoding="utf-8"))
    claim, champion, base = summary.get("claim") or {}, summary["champion"], summary["baseline"]
    # on the holdout when a candidate was claimed there; a kept incumbent runs nothing on it: dev then
    split = "holdout" if champion.get("holdout") and base.get("holdout") else "dev"
    ratio = champion[split]["cost_per_task"] / base[split]["cost_per_task"]
    figure("main_job_decision", summary["decision"]["rule"], None, None, evidence=summary["decision"].get("evidence"))
    kept = champion.get("variant_hash") == base.get("variant_hash")
    # a verdict is measured, not a target: the search may rightly keep the incumbent or leave a claim inconclusive
    figure("main_job_verdict", "none (incumbent kept)" if kept else claim["verdict"], "reported", None,
           **{k: claim.get(k) for k in ("mean_diff", "low", "high", "n", "clusters", "design_effect")})
    figure("main_job_cost_ratio", round(ratio, 3), "< 1 (cheaper than the incumbent)", ratio < 1, changes=champion.get("changes"),
           split=split)
    # of the champion's dev gain over its own model with the base harness, the share the mutators' edits earned
    gains = {r["layer"]: r["gain"] for r in summary.get("ablation", []) if r.get("gain") is not None}
    harness = gains.get("harness settings", 0.0) + gains.get("mutator edits", 0.0)
    share = gains.get("mutator edits", 0.0) / harness if harness > 0 else 0.0
    figure("main_job_mutator_share", round(share, 3), "> 0 (mutator-authored edits in what ships)", share > 0,
           layers=summary.get("ablation", []), authors=champion.get("authors"))
    figure("main_job_spend_usd", (summary.get("spend") or {}).get("spent_usd"), None, None)
    print(summary["headline"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
