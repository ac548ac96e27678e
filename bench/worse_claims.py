"""False non-inferiority through the whole search: does the default question ship a cheaper model that is truly worse?

Two routes of the null provider (bench/null_provider.py, the plugin bench/null_claims.py uses: its
task-dependent bias spread over [0.2, 0.8]), each drawing its own coins, as two models do:

- ``null/strong``, the incumbent (``model=null_strong``), priced like sim_large;
- ``null/worse``, priced like sim_small (20x cheaper per token), whose pass probability on every task
  is exactly 0.06 below the incumbent's (so within [0.14, 0.74]: nothing is clipped, and the true
  difference is -0.06 on every task and on average, 0.01 outside ``criteria.margin=0.05``).

1. **The default question.** ``evoharness search`` with every default (BFCL, all four categories,
   the default budget, rounds and mutators, ``criteria.decision=cheapest_noninferior``), with
   ``model=null_strong search.models=[null_worse]``: the only other model is the worse cheap one.
   A harness edit cannot change either route's expected quality, so every candidate on
   ``null_worse`` is truly 0.06 worse, and a ``win`` (non-inferior within 0.05 and cheaper) is false.
   Seeds 0..9, two searches at a time. Target: no ``win`` in 10.
2. **``--small``.** The same at a small holdout (``workload.options.categories=[multi_turn_base]``,
   ``+workload.options.limit_per_split=20``: 20 scenarios, 20 tasks per split). The search must refuse
   it before anything is paid (exit 2, one line naming the holdout's clusters and what is needed);
   then, under ``search.allow_underpowered=true``, the false-win count (informational).

The search is the CLI, ``PYTHONPATH=bench python -m evoharness search --config-dir bench/null_conf
plugins=[null_provider] model=null_strong search.models=[null_worse] ...``: the plugin registers the
routes in every process (the search's and its workers'), and the config dir holds the two model
configs, which ``model=`` and ``search.models`` find by name.

    python bench/worse_claims.py [--seeds N] [--quick]   # 10 seeds (~30 min on 2 cores); --quick 3 seeds (~12 min)
    python bench/worse_claims.py --small [--seeds N]     # the refusal, then N small searches (~12 min for 10)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import ROOT, figure
from null_provider import CONF, NULL_ROUTES, WORSE_SHIFT

MARGIN = 0.05
assert NULL_ROUTES["worse"].shift == WORSE_SHIFT < -MARGIN  # truly worse than the margin allows
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))}
SMALL = ["workload.options.categories=[multi_turn_base]", "+workload.options.limit_per_split=20"]


def search_command(seed: int, runs_dir: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "evoharness", "search", "--config-dir", str(CONF), "plugins=[null_provider]", f"runs_dir={runs_dir}",
            f"search.study=worse{seed}", f"search.seed={seed}", f"seed={seed}", "model=null_strong", "search.models=[null_worse]",
            "criteria.decision=cheapest_noninferior", f"criteria.margin={MARGIN}", *extra]


def child(seed: int, runs: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **PLUGIN_ENV}
    return subprocess.run(search_command(seed, runs, extra), cwd=ROOT, env=env, capture_output=True, text=True)


def outcome(runs: Path, seed: int) -> dict[str, Any] | None:
    """The seed's verdict, champion model, claim interval and clusters, from its records."""
    folder = runs / f"worse{seed}"
    if not (folder / "summary.json").exists():
        return None
    summary = json.loads((folder / "summary.json").read_text())
    claim = json.loads((folder / "claim.json").read_text()) if (folder / "claim.json").exists() else summary.get("claim") or {}
    champion = summary.get("champion") or {}
    return {"seed": seed, "verdict": claim.get("verdict"), "champion_model": _champion_route(champion), "changes": champion.get("changes"),
            "evidence": (summary.get("decision") or {}).get("evidence"), "mean_diff": _r(claim.get("mean_diff")),
            "low": _r(claim.get("low")), "high": _r(claim.get("high")), "clusters": claim.get("clusters"), "n": claim.get("n"),
            "p_value": _r(claim.get("p_value")), "cost_saving": _r(claim.get("cost_saving"), 5),
            "underpowered": claim.get("underpowered"),
            # the dev selection's view of the worse model: each of its front members run on dev, against the incumbent
            "worse_on_dev": [{"changes": m.get("changes"), "mean_diff": _r(v.get("mean_diff")), "low": _r(v.get("low"))}
                             for m in summary.get("front") or [] if "model=null_worse" in str(m.get("changes"))
                             for v in [m.get("dev_vs_reference")] if v]}


def _champion_route(champion: dict[str, Any]) -> str:
    """The champion's model: the ``model=`` in its changes, else the incumbent's."""
    changes = str(champion.get("changes") or "")
    for part in changes.split(","):
        part = part.strip()
        if part.startswith("model="):
            return part.removeprefix("model=")
    return "null_strong (incumbent's)"


def _r(value: Any, digits: int = 3) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def run_seeds(seeds: list[int], runs: Path, extra: list[str]) -> tuple[list[dict[str, Any]], list[float]]:
    def run(seed: int) -> tuple[dict[str, Any] | None, float]:
        start = time.perf_counter()
        proc = child(seed, runs, extra)
        took = time.perf_counter() - start
        got = outcome(runs, seed)
        if proc.returncode != 0 or got is None:
            print(f"seed {seed} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-3:]}", file=sys.stderr)
            return None, took
        got["minutes"] = round(took / 60, 1)
        print(json.dumps(got), flush=True)
        return got, took

    with ThreadPoolExecutor(max_workers=2) as pool:  # two searches at a time: the machine has 2 cores
        results = list(pool.map(run, seeds))
    return [r for r, _ in results if r is not None], [t for _, t in results]


def summarise(name: str, rows: list[dict[str, Any]], seeds: list[int], times: list[float], *, informational: bool) -> int:
    """The figure: ``win`` verdicts among the searches, with what the champions were and how their claims read."""
    verdicts = [r["verdict"] for r in rows]
    wins = verdicts.count("win")
    champions = [r["champion_model"] for r in rows]
    evidence = [str(r["evidence"]) for r in rows]
    # a kept incumbent's claim compares it with itself: only the others' intervals say anything
    worse = [r for r in rows if r["champion_model"] == "null_worse"]
    figure(name, wins, "reported" if informational else 0, None if informational else (wins == 0 and len(rows) == len(seeds)),
           seeds=len(seeds), completed=len(rows), verdicts={v: verdicts.count(v) for v in sorted(set(map(str, verdicts)))},
           champions={c: champions.count(c) for c in sorted(set(map(str, champions)))},
           dev_evidence={e: evidence.count(e) for e in sorted(set(evidence))},
           worse_champion_claims=[[r["mean_diff"], r["low"], r["high"]] for r in worse],
           worse_champion_median_diff=round(statistics.median(r["mean_diff"] for r in worse), 3) if worse else None,
           minutes_per_search=round(statistics.median(times) / 60, 1) if times else None)
    return wins


def refusal(runs: Path) -> None:
    """The small holdout without allow_underpowered: refused before anything is paid for."""
    start = time.perf_counter()
    proc = child(100, runs, SMALL)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    paid = (runs / "worse100").exists() or any(runs.glob("**/spend.jsonl"))
    ok = proc.returncode == 2 and len(lines) == 1 and "holdout" in lines[0] and "cluster" in lines[0] and not paid
    figure("small_holdout_refused", ok, True, ok, exit_code=proc.returncode, stderr_lines=len(lines), paid_work=paid,
           message=lines[0] if len(lines) == 1 else lines[-3:], seconds=round(time.perf_counter() - start, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, help="searches to run (default 10; --quick 3)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--small", action="store_true", help="the small holdout: the refusal, then allow_underpowered searches")
    parser.add_argument("--keep", help="runs folder to use and keep (default: a new temp dir)")
    parser.add_argument("--report", help="print the figures of a kept runs folder again, running nothing")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else 3 if args.quick else 10))
    if args.report:
        runs = Path(args.report) / ("small" if args.small else "default")
        rows = [r for r in (outcome(runs, seed) for seed in seeds) if r is not None]
        for r in rows:
            print(json.dumps(r))
        summarise("false_noninferior_wins_small_underpowered" if args.small else "false_noninferior_wins_e2e", rows, seeds, [],
                  informational=args.small)
        return 0
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="worse-claims-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"runs under {base}", file=sys.stderr)
    start = time.perf_counter()
    if args.small:
        refusal(base / "refused")
        rows, times = run_seeds(seeds, base / "small", [*SMALL, "search.allow_underpowered=true"])
        wins = summarise("false_noninferior_wins_small_underpowered", rows, seeds, times, informational=True)
    else:
        rows, times = run_seeds(seeds, base / "default", [])
        wins = summarise("false_noninferior_wins_e2e", rows, seeds, times, informational=False)
    print(f"worse{' (small holdout)' if args.small else ''}: {wins} false win(s) in {len(rows)} searches; "
          f"{(time.perf_counter() - start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
