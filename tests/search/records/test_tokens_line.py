"""The answer's account of where the tokens go: per task on dev, by part, incumbent and champion."""
from __future__ import annotations

from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import aggregate
from evoharness.search.records.summary import tokens_line


def episode(task: str, parts: dict[str, int], output: int) -> EpisodeResult:
    return EpisodeResult(task_id=task, sample=0, status="scored", passed=True, score=1.0, named={}, delivered=True,
                         safety_violations=0, cost_usd=0.01, latency_s=1.0, prompt_tokens=sum(parts.values()),
                         completion_tokens=output, model_calls=3, tool_calls=2, tool_errors=0, detail="", input_parts=parts)


def test_dev_metrics_carry_tokens_by_part_and_the_line_reads_them_largest_first() -> None:
    eps = [episode("a", {"system": 1000, "tools": 20000, "tool_results": 3000, "history": 1000}, 200),
           episode("b", {"system": 1000, "tools": 10000, "tool_results": 9000, "history": 3000}, 400)]
    m = aggregate(eps, variant_hash="v", split="dev", samples=1).metrics
    assert m["tokens.tools"] == 15000 and m["tokens.tool_results"] == 6000 and m["tokens.output"] == 300
    assert sum(m[f"tokens.{p}"] for p in ("system", "tools", "tool_results", "history", "output")) == m["tokens_per_task"]
    line = tokens_line("incumbent", m)
    assert line is not None and line.strip().startswith("incumbent: 24,300 at $0.0100")
    assert line.index("tool schemas 15,000 (62%)") < line.index("tool results 6,000 (25%)") < line.index("system prompt 1,000")
    # an evaluation recorded without the parts: no line, rather than a split that is not known
    old = aggregate([episode("a", {}, 200)], variant_hash="v", split="dev", samples=1).metrics
    assert "tokens.tools" not in old and tokens_line("incumbent", old) is None


def test_the_prompts_cost_is_shared_by_tokens_and_the_parts_add_up_to_the_cost_per_task() -> None:
    from dataclasses import replace

    from evoharness.search.records.summary import part_costs

    eps = [replace(episode("a", {"system": 1000, "tools": 6000, "tool_results": 2000, "history": 1000}, 200), input_cost_usd=0.008),
           replace(episode("b", {"system": 1000, "tools": 6000, "tool_results": 2000, "history": 1000}, 200), input_cost_usd=0.008)]
    m = aggregate(eps, variant_hash="v", split="dev", samples=1).metrics
    assert m["cost.input"] == 0.008
    costs = part_costs(m)
    assert costs is not None and abs(costs["history"] - 0.0008) < 1e-12
    assert abs(costs["tools"] - 0.0048) < 1e-12 and abs(costs["output"] - 0.002) < 1e-12 and costs["escalated"] == 0.0
    line = tokens_line("incumbent", m)
    assert line is not None and "tool schemas 6,000 (59%, $0.00480)" in line and "output 200 (2%, $0.00200)" in line
    # one episode whose prompts' cost is unknown: no cost by part at all, the tokens still shown
    mixed = aggregate([eps[0], replace(eps[1], input_cost_usd=None)], variant_hash="v", split="dev", samples=1).metrics
    assert "cost.input" not in mixed and part_costs(mixed) is None
    shown = tokens_line("incumbent", mixed) or ""
    assert "$0.0048" not in shown and "tool schemas 6,000 (59%)" in shown


def test_prompt_tokens_read_from_a_providers_cache_leave_the_prompts_cost_whole() -> None:
    from dataclasses import replace

    from evoharness.search.records.summary import part_costs

    eps = [replace(episode(t, {"system": 1000, "tools": 6000, "tool_results": 2000, "history": 1000}, 200), input_cost_usd=0.005,
                   cached_tokens=cached) for t, cached in (("a", 7000), ("b", 0))]
    m = aggregate(eps, variant_hash="v", split="dev", samples=1).metrics
    assert m["tokens.cached"] == 3500 and m["cost.input"] == 0.005 and part_costs(m) is None
    line = tokens_line("incumbent", m) or ""
    assert "3,500 prompt tokens at the provider's cache rate" in line and "the prompts' $0.00500 is not split" in line
    assert "tool schemas 6,000 (59%)" in line and "%, $" not in line


def test_a_prompts_cost_with_no_prompt_tokens_to_share_it_is_not_split() -> None:
    from evoharness.search.records.summary import part_costs

    dev = {"cost_per_task": 0.01, "cost.input": 0.004, "tokens.system": 0, "tokens.tools": 0, "tokens.tool_results": 0,
           "tokens.history": 0, "tokens.cached": 0}
    assert part_costs(dev) is None  # else the $0.004 would vanish from the parts
    assert (part_costs({**dev, "cost.input": 0.0}) or {}).get("output") == 0.01
