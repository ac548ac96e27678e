"""Racing proposals against their anchors: the decision rule's error rates, then a search with
racing on against the same search with it off.

Part 1 (Monte-Carlo, ~1 min): the rule of search/optimise/race.py (``plan`` and ``judge``, called
as the search calls them) on simulated paired data at the smallest first block the product
accepts (race.MIN_FIRST_BLOCK, the default), over the default train split (40 tasks, 2 samples)
and over a split of 20 (two blocks: only "clearly worse" stops a proposal early there, since the
futility rule waits for 20 tasks: its survive rates are reported, not targets). A task's
anchor pass probability is logistic(mu + cluster effect + task effect); the edit moves each
task's logit by delta + a cluster and a task interaction (it helps some tasks and hurts others),
with delta set so the edit's true mean effect on pass rate is +0.10, +0.05, 0 or
-0.05. The same seed makes the two sides' samples agree unless the edit changed the episode
(common random numbers with probability ``rho``, independent draws otherwise). Two layouts: every
task its own cluster (the BFCL train prefix: 40 scenarios in its first 40 tasks), and clusters of
four consecutive tasks (the worst case: a first block of a few clusters). Figures: how often a
good edit is raced out (false reject), how often a worse one survives to the whole split, how
often a worse or null one is accepted, and the tasks a proposal costs.

Then the extension beyond the search's tasks (``race.extension``): how often a null or worse edit
is accepted after its extra looks, and how often, among fifteen null edits and one good one on an
anchor, the good one ranks first when proposals are ranked by ``race.estimate`` against by their
own 40 tasks.

Part 2 (``--search``, ~10 min on 2 cores): the same small search on the simulated model with
``search.race.enabled=true`` and ``=false``: paid train episodes, proposals evaluated, and the
champion's train and dev quality.

    python bench/racing.py [--search] [--reps N]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _common import ROOT, figure

from evoharness.search.optimise.race import MIN_FIRST_BLOCK, RaceSettings, estimate, extension, judge, plan, promising

SAMPLES = 2
MU, CLUSTER_SD, TASK_SD, EDIT_SD = 0.6, 1.3, 1.3, 0.6


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _logits(rng: np.random.Generator, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Anchor logits and the edit's per-task interaction for ``n`` tasks in clusters of ``size``."""
    clusters = np.repeat(np.arange(math.ceil(n / size)), size)[:n]
    k = int(clusters.max()) + 1
    anchor = MU + rng.normal(0, CLUSTER_SD, k)[clusters] + rng.normal(0, TASK_SD, n)
    interaction = rng.normal(0, EDIT_SD, k)[clusters] + rng.normal(0, EDIT_SD, n)
    return anchor, interaction


def calibrate(effect: float, size: int) -> float:
    """The logit shift whose mean effect on pass rate over the task population is ``effect``."""
    rng = np.random.default_rng(12345)
    anchor, interaction = _logits(rng, 400_000, size)
    base = float(_sigmoid(anchor).mean())
    lo, hi = -4.0, 4.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if float(_sigmoid(anchor + interaction + mid).mean()) - base < effect:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _paired(rng: np.random.Generator, anchor_logit: np.ndarray, interaction: np.ndarray, shift: float, rho: float,
            u: np.ndarray) -> np.ndarray:
    """The edit's per-task pass rate, its draws shared with the anchor's (``u``) with probability ``rho``."""
    pb = _sigmoid(anchor_logit + interaction + shift)
    same = rng.random(u.shape) < rho  # the edit left this episode's draws as they were
    v = np.where(same, u, rng.random(u.shape))
    return np.asarray((v < pb[:, None]).mean(axis=1))


def race_once(rng: np.random.Generator, shift: float, size: int, rho: float, race: RaceSettings, n_tasks: int,
              reserve: int = 0) -> tuple[str, int, float | None]:
    """One proposal's race as the search runs it: its decision, the tasks it ran, and the quality it
    is ranked by (None when raced out). ``reserve``: train tasks beyond the split it may extend into."""
    anchor_logit, interaction = _logits(rng, n_tasks + reserve, size)
    u = rng.random((n_tasks + reserve, SAMPLES))
    a = (u < _sigmoid(anchor_logit)[:, None]).mean(axis=1)
    b = _paired(rng, anchor_logit, interaction, shift, rho, u)
    return judged(a, b, size, race, n_tasks, reserve)


def judged(a: np.ndarray, b: np.ndarray, size: int, race: RaceSettings, n_tasks: int, reserve: int) -> tuple[str, int, float | None]:
    names = [f"c{i // size}" for i in range(len(a))]
    for n in plan(n_tasks, first_block=race.first_block, growth=race.growth):
        step = judge(a[:n], b[:n], clusters=names[:n], ran=n, of=n_tasks, confidence=0.95)
        if step.decision != "continue":
            break
    if step.decision == "rejected":
        return "rejected", n, None
    more = extension(n_tasks, reserve, growth=race.growth, max_tasks=race.max_tasks)
    if not (more and promising(step)):
        return step.decision, n, float(b[:n_tasks].mean())
    for m in more:
        n = n_tasks + m
        step = judge(a[:n], b[:n], clusters=names[:n], ran=n, of=n_tasks + more[-1], confidence=0.95)
        if step.decision != "continue":
            break
    return step.decision, n, estimate(float(a[:n_tasks].mean()), a[:n], b[:n])


def select_once(rng: np.random.Generator, shifts: Sequence[float], size: int, rho: float, race: RaceSettings, n_tasks: int,
                reserve: int) -> tuple[int, int]:
    """Proposals on one anchor, raced and ranked as the search ranks them: which one ranks first
    (its index, -1 when every one was raced out) and the proposal tasks run."""
    anchor_logit, _ = _logits(rng, n_tasks + reserve, size)
    u = rng.random((n_tasks + reserve, SAMPLES))
    a = (u < _sigmoid(anchor_logit)[:, None]).mean(axis=1)
    ranked, tasks = [], 0
    for i, shift in enumerate(shifts):
        _, interaction = _logits(rng, n_tasks + reserve, size)
        _, n, value = judged(a, _paired(rng, anchor_logit, interaction, shift, rho, u), size, race, n_tasks, reserve)
        tasks += n
        if value is not None:
            ranked.append((value, i))
    return (max(ranked)[1] if ranked else -1), tasks


def monte_carlo(reps: int) -> None:
    # design targets: a +0.10 edit is rarely lost, a +0.05 one usually kept, a -0.05 one usually stopped early
    targets = {0.10: ("false_reject", 0.15), 0.05: ("false_reject", 0.35), 0.0: ("survive", 0.50), -0.05: ("survive", 0.25)}
    race = RaceSettings(first_block=MIN_FIRST_BLOCK)
    for n_tasks in (40, 20):
        for size, rho in ((1, 0.8), (4, 0.8), (1, 0.3)):
            layout = f"{n_tasks} tasks, first_block={race.first_block}, clusters of {size}, rho={rho}"
            for effect, (kind, target) in targets.items():
                shift = calibrate(effect, size)
                rng = np.random.default_rng(int(1000 * (effect + 1)) + 17 * size + n_tasks)
                out = [race_once(rng, shift, size, rho, race, n_tasks) for _ in range(reps)]
                rejected = sum(d == "rejected" for d, _, _ in out) / reps
                accepted = sum(d == "accepted" for d, _, _ in out) / reps
                tasks = sum(n for _, n, _ in out) / reps
                value = rejected if kind == "false_reject" else 1.0 - rejected
                aimed = kind == "false_reject" or n_tasks >= 2 * race.first_block * 2
                figure(f"{kind} rate, true effect {effect:+.2f} ({layout})", round(value, 3), f"<= {target}" if aimed else "reported",
                       value <= target if aimed else None,
                       accepted=round(accepted, 3), mean_tasks=round(tasks, 1), of_tasks=n_tasks, reps=reps)
                if effect <= 0:  # the interval's one-sided level, up to the Monte-Carlo error (two standard errors)
                    figure(f"accepted rate, true effect {effect:+.2f} ({layout})", round(accepted, 3), "<= 0.025",
                           accepted <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / reps))


def extended(reps: int) -> None:
    """The extension beyond the search's 40 tasks (120 in all, of a train split with 200 more):
    how often a null or worse edit is accepted after its extra looks, how often a good one is; then
    fifteen null edits and one good one on one anchor, ranked as the search ranks them: how often
    the good one ranks first, with the extension and without it (``max_tasks`` 40), and the
    proposal tasks each way."""
    n_tasks, reserve = 40, 200
    on, off = RaceSettings(first_block=MIN_FIRST_BLOCK), RaceSettings(first_block=MIN_FIRST_BLOCK, max_tasks=n_tasks)
    for size, rho in ((1, 0.3), (4, 0.3), (1, 0.8)):
        layout = f"40 tasks + up to 80 beyond, clusters of {size}, rho={rho}"
        for effect in (0.10, 0.05, 0.0, -0.05):
            shift = calibrate(effect, size)
            rng = np.random.default_rng(int(1000 * (effect + 1)) + 17 * size + 7)
            out = [race_once(rng, shift, size, rho, on, n_tasks, reserve) for _ in range(reps)]
            accepted = sum(d == "accepted" for d, _, _ in out) / reps
            tasks = sum(n for _, n, _ in out) / reps
            if effect <= 0:
                figure(f"accepted rate after extension, true effect {effect:+.2f} ({layout})", round(accepted, 3), "<= 0.025",
                       accepted <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / reps), mean_tasks=round(tasks, 1), reps=reps)
            else:
                figure(f"accepted rate after extension, true effect {effect:+.2f} ({layout})", round(accepted, 3), "reported", None,
                       mean_tasks=round(tasks, 1), reps=reps)
        for effect in (0.10, 0.05):
            shifts = [calibrate(0.0, size)] * 15 + [calibrate(effect, size)]
            picks = {}
            for name, race in (("extension", on), ("no extension", off)):
                rng = np.random.default_rng(99 + size)
                runs = [select_once(rng, shifts, size, rho, race, n_tasks, reserve) for _ in range(max(1, reps // 10))]
                picks[name] = (sum(i == len(shifts) - 1 for i, _ in runs) / len(runs), sum(t for _, t in runs) / len(runs))
            figure(f"a {effect:+.2f} edit ranks first among it and 15 null edits, extension / none ({layout})",
                   f"{picks['extension'][0]:.3f} / {picks['no extension'][0]:.3f}", "extension > none",
                   picks["extension"][0] > picks["no extension"][0],
                   proposal_tasks=f"{picks['extension'][1]:.0f} / {picks['no extension'][1]:.0f}", reps=max(1, reps // 10))


def run_search(tmp: Path, study: str, race: bool) -> dict[str, object]:
    import os
    import subprocess

    import optuna

    args = [sys.executable, "-m", "evoharness", "search", f"runs_dir={tmp}", f"search.study={study}",
            "search.rounds=3", "search.trials_per_round=6", "search.population_size=3", "search.train_limit=40",
            "search.samples=1", "search.max_front_dev=2", "search.resamples=2000", "search.teacher=null",
            "mutators.enabled=[{name: rule_miner}, {name: prompt_suffix}, {name: workflow_step_append}]",
            f"search.race.enabled={str(race).lower()}", "hydra/launcher=basic"]
    started = time.time()
    proc = subprocess.run(args, cwd=ROOT, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, capture_output=True,
                          text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    storage = f"sqlite:///{tmp / study / 'study.db'}"
    from evoharness.search.optimise.study import episode_keys, eval_keys, paid_episodes

    episodes, proposals, pruned, ran, planned = 0, 0, 0, 0, 0
    earlier: set[str] = set()  # what an earlier round paid for is a free re-read, as the search counts it
    for k in range(3):
        s = optuna.load_study(study_name=f"{study}/r{k}", storage=storage)
        episodes += paid_episodes(s, earlier)
        earlier |= eval_keys(s) | set(episode_keys(s))
        for t in s.get_trials(deepcopy=False):
            if str(t.user_attrs.get("origin", "")).startswith("new:") and t.state.is_finished():
                proposals += 1
                pruned += t.state == optuna.trial.TrialState.PRUNED
                race = t.user_attrs.get("race") or {}
                ran, planned = ran + int(race.get("tasks", 0)), planned + int(race.get("of", 0))
    summary = json.loads((tmp / study / "summary.json").read_text())
    champion = summary["champion"]
    return {"episodes": episodes, "proposals": proposals, "pruned": pruned, "wall_s": round(time.time() - started),
            "saved": round(1 - ran / planned, 3) if planned else None,
            "spent_usd": summary.get("spend", {}).get("spent_usd"),
            "train": champion.get("train", {}).get("pass_rate"), "dev": champion.get("dev", {}).get("pass_rate")}


def compare(tmp: Path) -> None:
    on, off = run_search(tmp, "race_on", True), run_search(tmp, "race_off", False)
    figure("proposals evaluated per round budget, race on / off", f"{on['proposals']} / {off['proposals']}", "on > off",
           on["proposals"] > off["proposals"], pruned=on["pruned"])
    figure("paid train episodes, race on / off", f"{on['episodes']} / {off['episodes']}", "reported", None)
    # the race-on search's proposals against evaluating each of them on the whole split
    saved = on["saved"]
    figure("proposal tasks saved by racing (1 - tasks run / whole split, race on)", saved, ">= 0.333",
           None if saved is None else float(saved) >= 1 / 3)  # type: ignore[arg-type]
    figure("spend incl. dev and holdout (USD), race on / off", f"{on['spent_usd']} / {off['spent_usd']}", "reported", None)
    figure("champion train pass_rate, race on / off", f"{on['train']} / {off['train']}", "reported", None)
    figure("champion dev pass_rate, race on / off", f"{on['dev']} / {off['dev']}", "on >= off - 0.05",
           None if on["dev"] is None or off["dev"] is None else float(on["dev"]) >= float(off["dev"]) - 0.05)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--search", action="store_true", help="also run the search with racing on and off (~10 min)")
    args = parser.parse_args(argv)
    started = time.time()
    monte_carlo(args.reps)
    extended(args.reps)
    if args.search:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            compare(Path(tmp))
    print(f"racing: done in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
