"""The evaluate table shows what handed-over turns cost when a report escalated, and only then."""
from __future__ import annotations

from evoharness.search.evaluation.metrics import EvalReport
from evoharness.search.records.tables import metrics_table


def report(metrics: dict[str, float]) -> EvalReport:
    return EvalReport(variant_hash="h" * 64, split="dev", samples=1, episodes=(), metrics=metrics, tasks=())


def test_escalation_rows_appear_only_beside_a_report_that_escalated() -> None:
    plain = report({"pass_rate": 0.7, "cost_per_task": 0.03})
    handed = report({"pass_rate": 0.72, "cost_per_task": 0.031, "cost.escalated": 0.0021, "escalated_turns": 0.1})
    table = metrics_table([("incumbent", plain), ("escalating", handed)])
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:]}
    assert rows["cost.escalated"][0] == "-" and rows["cost.escalated"][1].startswith("$0.0021")
    assert rows["escalated_turns"][0] == "-" and rows["escalated_turns"][1].startswith("0.1")
    assert "escalated" not in metrics_table([("incumbent", plain)])
