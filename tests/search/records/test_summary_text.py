"""The printed end of a search leads with the answer: what ships and why, the command, the edits
with their authors, the ablation; the front and the claim's figures come after."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from evoharness.search.genome import Genome, PoolEntry, initial_pools
from evoharness.search.genome_edits import describe, edits
from evoharness.search.records.summary import summary_text

AGENT = {"prompt_sections": {"role": "You act.", "policy": "Be careful."}, "tools": ["mv", "cd"],
         "workflow": [{"name": "act", "instructions": "act"}, {"name": "verify", "instructions": "v", "optional": True}]}


def pools_and_champion() -> tuple[Any, Genome]:
    base = initial_pools(AGENT, models=["sim_medium"], temperatures=[0.0], base_model="sim_large", base_temperature=0.0)
    p = replace(base,
                steps={**base.steps, "verify_results": PoolEntry({"name": "verify_results", "instructions": "check"},
                                                                 "workflow_step_append", "7 failed episodes stopped early")},
                tools={"mv": (PoolEntry({}, "baseline"), PoolEntry({"rules": ["r"]}, "rule_miner", "mv.destination wrong 5x"))})
    return p, Genome(model=1, steps={"verify": True, "verify_results": True}, tools={"mv": 1})


def summary(verdict: str, *, snapshot: str | None = "runs/s/champion.json", second_look: bool = False) -> dict[str, Any]:
    pools, g = pools_and_champion()
    champion = {"trial": 7, "round": 2, "variant_hash": "c" * 64, "champion": True, "genome": g.to_dict(),
                "authors": ["workflow_step_append", "rule_miner"],
                "changes": describe(g, pools, base_format="json", base_steps={"verify": False}),
                "edits": edits(g, pools, base_format="json", base_steps={"verify": False}),
                "train": {"pass_rate": 0.8, "cost_per_task": 0.01},
                "dev": {"pass_rate": 0.81, "cost_per_task": 0.01, "tool_failure_rate": 0.016, "tokens_per_task": 52000},
                "holdout": {"pass_rate": 0.79, "cost_per_task": 0.01, "latency_p95": 1.0}}
    return {
        "study": "s",
        "objectives": [{"metric": "pass_rate", "direction": "maximize"}, {"metric": "cost_per_task", "direction": "minimize"}],
        "baseline": {"variant_hash": "b" * 64, "train": {"pass_rate": 0.79}, "dev": {"pass_rate": 0.78, "cost_per_task": 0.1,
                                                                         "tool_failure_rate": 0.005, "tokens_per_task": 34000},
                     "holdout": {"pass_rate": 0.76, "cost_per_task": 0.1, "latency_p95": 1.0}},
        "front": [champion], "champion": champion, "decision": {"rule": "cheapest_noninferior", "margin": 0.05},
        "claim": {"verdict": verdict, "decision": "cheapest_noninferior", "metric": "pass_rate", "margin": 0.05, "mean_diff": 0.03,
                  "low": -0.04, "high": 0.1, "confidence": 0.95, "n": 164, "looks": 2 if second_look else 1,
                  "second_look": second_look},
        "ablation": [{"layer": "model", "quality": 0.62, "gain": -0.16}, {"layer": "harness settings", "quality": 0.7, "gain": 0.08},
                     {"layer": "mutator edits", "quality": 0.81, "gain": 0.11}],
        "snapshots": {"champion_path": snapshot} if snapshot else {}, "paths": {"report": "runs/s/report.html"},
        "spend": {"spent_usd": 188.05, "budget_usd": None, "capped_in_round": None, "projected_usd": 517.65},
    }


def test_a_win_leads_with_the_decision_the_command_the_edits_and_the_ablation() -> None:
    lines = summary_text(summary("win")).splitlines()
    front = next(i for i, line in enumerate(lines) if line.startswith("Pareto front"))
    # the verdict first, with the variant that ships; then why, the command, what it spent, what got worse
    assert lines[0] == "Answer: ship trial 7 (variant cccccccccccc): a win on the sealed holdout"
    assert lines[1].startswith("  Why: cheapest_noninferior (margin 0.05): ship model=sim_medium")
    assert lines[2] == "  Ship it: evoharness promote runs/s/champion.json && evoharness compile"
    assert lines[3] == "  Spent: $188.05, against a projection of at most $517.65"
    assert lines[4] == ("  Worse than the incumbent on dev: tool_failure_rate 0.005 -> 0.016 (+220%); "
                        "tokens_per_task 34,000 -> 52,000 (+53%)")
    answer = "\n".join(" ".join(line.split()) for line in lines[:front])
    # every edit on its own line with who made it and why; the base config's own step and the model are not a mutator's
    assert "+step verify base config\n" in answer
    assert "+step verify_results workflow_step_append: 7 failed episodes stopped early" in answer
    assert "tool mv#1 rule_miner: mv.destination wrong 5x" in answer
    assert "model=sim_medium search" in answer
    assert "mutator edits +0.110" in answer and "earned 58% of the gain" in answer  # 0.11 of 0.08 + 0.11
    assert any(line.startswith("Holdout verdict: win (non-inferior and cheaper), over 164 tasks") for line in lines[front:])
    # the claim's interval and cost are said once, in the answer: no second set of units below
    assert sum("-0.040" in line for line in lines) == 1 and "USD" not in "\n".join(lines)
    assert lines[front] == "Pareto front of study s: 1 member, below the baseline's row (* = champion):"


def test_no_win_says_nothing_ships_and_a_second_look_is_flagged_in_the_answer() -> None:
    text = summary_text(summary("inconclusive", second_look=True))
    head = text.split("Pareto front")[0]
    assert "Ship it" not in text and "Not shipped: runs/s/champion.json is not a win" in head
    assert head.startswith("Answer: keep the incumbent (variant bbbbbbbbbbbb); the champion, trial 7 (variant cccccccccccc), "
                           "did not win on the holdout (verdict inconclusive)\n")
    assert "Second look at the holdout (look 2)" in head


def test_the_incumbent_kept_has_nothing_to_ship() -> None:
    s = summary("inconclusive", snapshot=None)
    s["champion"] = {**s["champion"], "edits": [], "changes": "baseline", "variant_hash": "b" * 64}
    s["ablation"] = []
    text = summary_text(s)
    head = text.split("Pareto front")[0]
    assert head.startswith("Answer: keep the incumbent (variant bbbbbbbbbbbb); no candidate qualified, nothing ships\n")
    assert "Edits" not in head and "gain comes from" not in head and "Worse" not in head
    assert "  Spent: $188.05, against a projection of at most $517.65\n" in head
    assert "Holdout: no candidate was claimed; the incumbent stays" in text and "Holdout verdict" not in text


def test_no_share_of_a_net_loss_is_claimed() -> None:
    s = summary("win")
    s["ablation"] = [{"layer": "model", "quality": 0.7, "gain": -0.045}, {"layer": "harness settings", "quality": 0.6, "gain": -0.091},
                     {"layer": "mutator edits", "quality": 0.7, "gain": 0.091}]
    text = summary_text(s)
    assert "gained nothing net (+0.000)" in text and "earned" not in text


def test_a_long_note_is_cut_at_a_word_and_nothing_better_is_called_worse() -> None:
    s = summary("win")
    note = "missed_call 12 (" + ", ".join(f"tool_{i}.argument" for i in range(30))
    s["champion"]["edits"] = [{**s["champion"]["edits"][0], "note": note}]
    s["champion"]["dev"] = {**s["baseline"]["dev"], "pass_rate": 0.9, "tool_failure_rate": 0.001}
    text = summary_text(s)
    note = next(line for line in text.splitlines() if "missed_call 12" in line)
    assert note.endswith("…") and note.rstrip("…").split()[-1].rstrip(",").startswith("tool_") \
        and note.rstrip("…").rstrip(",").endswith(".argument")
    assert "Worse than the incumbent" not in text
