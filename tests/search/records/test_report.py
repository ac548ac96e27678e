from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.records.format import fmt_metric
from evoharness.search.records.report import render_report, write_report
from evoharness.search.records.report_svg import Point, nice_ticks, scatter_svg

OBJECTIVES = [
    {"metric": "pass_rate", "direction": "maximize"},
    {"metric": "cost_per_task", "direction": "minimize"},
    {"metric": "latency_p95", "direction": "minimize"},
]
VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
DIFF = "--- baseline\n+++ candidate\n@@ -1,2 +1,2 @@\n context\n-old rule\n+new rule <script>alert(1)</script>\n"


def _metrics(q: float, c: float, lat: float) -> dict[str, float]:
    return {"pass_rate": q, "score_mean": q, "cost_per_task": c, "latency_p95": lat, "latency_p50": lat / 2,
            "tokens_per_task": 1800 * c * 1000, "tool_failure_rate": 0.05}


def make_summary(verdict: str | None = "win") -> dict[str, Any]:
    trials = []
    for i in range(18):
        q, c, lat = 0.4 + 0.02 * (i % 9), 0.0008 + 0.0001 * (i % 7), 1.2 + 0.1 * (i % 5)
        trials.append({"trial": i, "round": i // 6, "variant_hash": f"h{i}", "genome": {"tool_format": "json"},
                       "authors": ["rule_miner"] if i % 2 else ["temperature", "<img src=x>"], "values": [q, c, lat],
                       "feasible": i % 5 != 4, "state": "COMPLETE"})
    trials.append({"trial": 18, "round": 2, "variant_hash": "h18", "genome": {}, "authors": [], "values": None,
                   "feasible": False, "state": "FAIL"})
    trials[7]["race"] = {"decision": "undecided", "tasks": 40, "of": 40, "mean_diff": 0.05, "low": -0.02, "high": 0.12, "clusters": 40,
                         "steps": [], "anchor_key": "k"}
    front = []
    for k, i in enumerate((8, 15, 6, 1)):
        t = trials[i]
        q, c, lat = t["values"]
        front.append({"trial": i, "round": t["round"], "variant_hash": t["variant_hash"], "genome": t["genome"], "authors": t["authors"],
                      "train": _metrics(q, c, lat), "dev": _metrics(q - 0.02, c, lat), "diff": DIFF if k != 3 else "",
                      "champion": k == 0})
    champion = dict(front[0], holdout=_metrics(0.55, 0.0009, 1.4))
    claim = None if verdict is None else {
        "verdict": verdict, "mean_diff": 0.06 if verdict == "win" else 0.01, "low": 0.02 if verdict == "win" else -0.03, "high": 0.1,
        "n": 120, "confidence": 0.95, "metric": "score", "cost_delta": 0.0001, "latency_delta": -0.2,
        "hashes": {"config": "c" * 12, "workload": "w" * 12, "splits": "s" * 12, "scorer": "k" * 12}}
    return {
        "schema_version": 2, "study": "demo<study>", "created_at": "2024-05-01T12:30:00+00:00", "storage": "sqlite:///runs/demo/study.db",
        "objectives": OBJECTIVES,
        "baseline": {"variant_hash": "base", "genome": {}, "authors": [], "train": _metrics(0.45, 0.001, 1.5),
                     "dev": _metrics(0.44, 0.001, 1.5), "holdout": _metrics(0.46, 0.0008, 1.6)},
        "trials": trials, "front": front, "champion": champion, "claim": claim,
        "paths": {"ledger": "runs/demo/ledger.jsonl", "claim": "runs/demo/claim.json",
                  "optimization_results": "runs/demo/optimization_results.yaml"},
    }


class Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.starts: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def count(self, tag: str, cls: str) -> int:
        return sum(1 for t, a in self.starts if t == tag and cls in (a.get("class") or "").split())


def parse(html: str) -> Checker:
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert checker.errors == [] and checker.stack == [], (checker.errors, checker.stack)
    return checker


def visible_text(html: str) -> str:
    return " ".join(parse(html).text)


def test_full_report_is_well_formed_and_complete() -> None:
    summary = make_summary("win")
    html = render_report(summary)
    doc = parse(html)
    plotted = [t for t in summary["trials"] if t["values"]]
    assert sum(1 for t, _ in doc.starts if t == "svg") == 3  # train: quality by cost and by latency; dev: by cost
    for cls, expected in (("trial", sum(t["feasible"] for t in plotted)), ("infeasible", sum(not t["feasible"] for t in plotted))):
        assert doc.count("circle", cls) == 2 * expected + 2  # the two train charts, plus a legend swatch on each
    assert doc.count("circle", "front") == 2 * 4 + 4 + 3  # the dev panel shows the 4 front members run on dev
    assert doc.count("polygon", "champion") == 3 * 2 and doc.count("rect", "baseline") == 3 * 2
    # no front line on dev: the members run there were picked from the train front, they are not a dev front
    assert doc.count("path", "front-line") == 2 and "front member run on dev" in visible_text(html)
    assert sum(1 for t, _ in doc.starts if t == "title") >= 2 * len(plotted)
    assert "pass rate vs cost per task (dev: what the decision read)" in visible_text(html)
    assert sum(1 for t, _ in doc.starts if t == "details") == 1 + 3  # the answer as printed, and three non-empty diffs
    assert doc.count("span", "add") == 3 and doc.count("span", "del") == 3
    text = visible_text(html)
    assert "Holdout: improvement confirmed (win)" in text and "95% CI [0.020, 0.100]" in text
    # paths as seen from the report's folder: the page travels, the machine's folders do not
    flat = " ".join(text.split())
    assert "optuna-dashboard sqlite:///study.db (in this page's folder)" in flat and "ledger: ledger.jsonl" in flat
    assert "runs/demo" not in text
    answer = next(t for t in doc.text if "Answer: ship" in t)
    assert answer.index("Answer: ship trial 8") < answer.index("Spent: ") and "Why: " not in answer  # the banner says why, once
    assert "c" * 12 in text and "$0.0009" in text and "1.40s" in text
    assert text.count("★") == 1  # champion marker in the front table
    assert not re.search(r"<(script|link|img)\b", html) and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_untrusted_text_is_escaped() -> None:
    html = render_report(make_summary("win"))
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "demo&lt;study&gt;" in html


@pytest.mark.parametrize("verdict", ["no_win", "inconclusive", None])
def test_non_win_never_claims_improvement(verdict: str | None) -> None:
    text = visible_text(render_report(make_summary(verdict))).lower()
    assert "confirmed" not in text and "(win)" not in text
    hits = [m.start() for m in re.finditer("improv", text)]
    assert hits, "the banner must say that no improvement is claimed"
    assert all(text[max(0, h - 3):h] == "no " and text[h:].startswith("improvement claimed") for h in hits)


@pytest.mark.parametrize("mutate", [
    lambda s: s.update(trials=[], front=[], champion=None, claim=None),
    lambda s: s.update(champion=None, claim=None),
    lambda s: s.update(claim=None),
    lambda s: s.update(trials=s["trials"][:1], front=s["front"][:1], baseline=None),
    lambda s: s.update(objectives=[], baseline={"train": {}, "dev": None, "holdout": None}, trials=[{"trial": 0, "values": [0.5]}]),
    lambda s: [t.update(values=[0.5, 0.001, 1.0]) for t in s["trials"] if t["values"]],  # all points equal
    lambda s: s["front"][0].update(train={}, dev=None, diff=None, authors=None),
    lambda s: s["claim"].update(confidence=None, mean_diff=float("nan"), hashes=None),
    lambda s: s.update(created_at="not a date", storage=None, paths=None, study=None),
])
def test_degenerate_inputs_render(mutate: Any) -> None:
    summary = make_summary("inconclusive")
    mutate(summary)
    parse(render_report(summary))


def test_minimal_summary_renders() -> None:
    text = visible_text(render_report({}))
    assert "no improvement claimed" in text and "no data" in text


def test_scatter_svg_degenerate_ranges() -> None:
    for pts in ([], [Point(1.0, 1.0, "trial", "t")], [Point(0.0, 0.0, "front", "a"), Point(0.0, 0.0, "front", "b")],
                [Point(None, 0.5, "trial", "x"), Point(0.2, None, "champion", "y")], [Point(float("nan"), float("inf"), "baseline", "z")]):
        svg = scatter_svg(pts, "cost_per_task", "pass_rate")
        assert not re.search(r"\b(nan|inf)\b", svg.lower())
        parse(svg)


def test_ticks_and_formatting() -> None:
    lo, hi, ticks = nice_ticks(0.00081, 0.00143)
    assert lo <= 0.00081 and hi >= 0.00143 and 3 <= len(ticks) <= 8
    assert fmt_metric(0.00123, "cost_per_task") == "$0.00123" and fmt_metric(1.5, "cost_per_task") == "$1.50"
    assert fmt_metric(-0.0001, "cost_per_task", signed=True) == "-$0.000100"
    assert fmt_metric(1.234, "latency_p95") == "1.23s" and fmt_metric(None, "pass_rate") == "–"
    assert fmt_metric(0.05, "diff", signed=True) == "+0.050"


def test_write_report_is_atomic(tmp_path: Path) -> None:
    target = write_report(make_summary("win"), tmp_path / "sub" / "report.html")
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]
    bad = copy.deepcopy(make_summary("win"))
    bad["trials"] = 5  # not a list: refused when read, before anything is replaced
    with pytest.raises(ConfigError, match=r"SearchOutcome.trials: is int 5, not Sequence"):
        write_report(bad, target)
    assert [p.name for p in target.parent.iterdir()] == ["report.html"] and "<svg" in target.read_text(encoding="utf-8")


def test_one_champion_star_when_trial_numbers_repeat_across_rounds() -> None:
    summary = make_summary()
    twin = dict(summary["front"][1], trial=summary["champion"]["trial"], round=summary["champion"]["round"] + 1, champion=False)
    summary["front"].append(twin)  # the same trial number in another round, another variant
    from evoharness.search.records.report import report_context

    rows = report_context(summary)["rows"]
    assert sum(r["champion"] for r in rows) == 1


def test_the_report_shows_the_splits_strata() -> None:
    summary = make_summary()
    summary["splits"] = {"hash": "ab" * 32, "strata": {"train": {"A": 3, "A+B": 2}, "dev": {"A": 1, "A+B": 1}, "holdout": {"A": 1}}}
    html = render_report(summary)
    assert "<h2>Splits</h2>" in html and "<td>A+B</td><td>2</td><td>1</td><td>0</td>" in html.replace("\n", "")


def test_a_cost_axis_spanning_decades_is_log_scale() -> None:
    from evoharness.search.records.report_svg import log_domain

    lo, hi, ticks = log_domain([0.003, 0.1]) or (0.0, 0.0, [])
    assert (lo, hi) == (pytest.approx(0.001), pytest.approx(0.1))
    assert ticks == pytest.approx([0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1])
    assert log_domain([0.003, 0.04]) is not None and log_domain([0.003, 0.006]) is None and log_domain([0.0, 0.1]) is None
    pts = [Point(0.003, 0.5, "baseline", "b"), Point(0.1, 0.9, "champion", "c"), Point(0.02, 0.7, "front", "f")]
    svg = scatter_svg(pts, "cost_per_task", "pass_rate", x_title="cost")
    assert "cost (log scale)" in svg and "$0.01" in svg
    linear = scatter_svg([Point(0.003, 0.5, "baseline", "b"), Point(0.006, 0.9, "champion", "c")], "cost_per_task", "pass_rate")
    assert "log scale" not in linear


def test_the_banner_carries_the_decision_headline_escaped() -> None:
    from evoharness.search.records.headline import headline

    summary = make_summary("inconclusive")
    summary["champion"] = {**summary["champion"], "changes": "model=<b>x</b>"}
    page = render_report(summary)
    line = headline(summary)
    assert "model=<b>x</b>" in line and "model=&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert "verdict inconclusive" in page
    assert 'class="decision"' not in render_report(make_summary(None))  # no claim, no decision line


@pytest.mark.parametrize("verdict", ["no_win", "inconclusive", "win"])
def test_a_cheapest_noninferior_claim_is_worded_as_that_question(verdict: str) -> None:
    summary = make_summary(verdict)
    summary["claim"] = {**summary["claim"], "decision": "cheapest_noninferior", "margin": 0.05, "reference": "sim_large"}
    text = visible_text(render_report(summary))
    assert "did not beat" not in text and "champion − reference" in text
    if verdict == "win":
        assert "Holdout: cheaper and non-inferior (win)" in text
    else:
        assert f"Holdout: {verdict} – nothing shipped" in text and "(win)" not in text


def test_each_front_member_shows_where_it_loses_reward() -> None:
    summary = make_summary("win")
    summary["front"][0]["losses"] = {"wrong_value": 6, "premature_stop": 2}
    text = visible_text(render_report(summary))
    assert "where reward is lost (failed train episodes by failure kind): wrong value 6, premature stop 2" in text
    assert text.count("where reward is lost") == 1  # members without stored failures show nothing


def test_losses_count_failed_episodes_per_kind(tmp_path: Path) -> None:
    import json

    from evoharness.search.optimise.mutation import losses

    evals = tmp_path / "evals"
    evals.mkdir()
    record = {"schema_version": 1, "evidence": [
        {"failures": [{"kind": "wrong_value"}, {"kind": "wrong_value"}, {"kind": "missed_call"}]},
        {"failures": [{"kind": "wrong_value"}]}, {"failures": []}]}
    (evals / "k1.json").write_text(json.dumps(record), encoding="utf-8")

    class Paths:
        pass

    p = Paths()
    p.evals = evals  # type: ignore[attr-defined]
    assert losses(p, "k1") == {"wrong_value": 2, "missed_call": 1}  # type: ignore[arg-type]
    assert losses(p, "missing") == {} and losses(p, None) == {}  # type: ignore[arg-type]


def test_a_kept_incumbent_says_the_holdout_stayed_sealed_not_a_zero_width_interval() -> None:
    from evoharness.search.evaluation.claim import no_candidate_claim
    from evoharness.search.evaluation.decision import decision_rule

    summary = make_summary("no_win")
    summary["claim"] = {**no_candidate_claim(baseline_hash="h0", champion_hash="h0", confidence=0.95, resamples=100, min_effect=0.03,
                                             hashes={}, rule=decision_rule("cheapest_noninferior", margin=0.05)), "looks": 0}
    text = visible_text(render_report(summary))
    assert "Holdout: sealed – the incumbent stays" in text and "nothing was run on the holdout" in text
    assert "CI [" not in text and "n = 0" not in text  # no interval of a test that was never run


def test_each_member_names_its_dashboard_trial_and_links_its_failed_tasks_and_the_doctor_is_said() -> None:
    summary = make_summary("win")
    summary["front"][0].update(dashboard_trial=37, transcripts={
        "page": "transcripts/0123456789ab-dev.html", "split": "dev", "failed": [f"bfcl/multi_turn_base_{i}" for i in range(45)]})
    summary["front"][1].update(transcripts={"page": "transcripts/ba9876543210-train.html", "split": "train", "failed": []},
                               edits=[{"edit": "+step check <args>", "author": "workflow_step_append", "note": "wrong_value 298 <b>x</b>"},
                                      {"edit": "model=sim_small", "author": "search", "note": ""}])
    summary["doctor"] = {"passed": True, "tasks_checked": 793, "tasks_total": 793, "shipped": True}
    html = render_report(summary)
    doc = parse(html)
    links = [a.get("href") for t, a in doc.starts if t == "a"]
    # 40 failed tasks linked one by one, then the page for the rest; a member that failed nothing links its page
    assert links[:40] == [f"transcripts/0123456789ab-dev.html#task=bfcl/multi_turn_base_{i}" for i in range(40)]
    assert links[40:] == ["transcripts/0123456789ab-dev.html", "transcripts/ba9876543210-train.html"]
    text = " ".join(visible_text(html).split())
    assert "failed on dev: 45 tasks (those the incumbent passed listed first)" in text and "and 5 more" in text
    assert "dashboard #37" in text and text.count("dashboard #") == 1
    # each edit's reason, as its author gave it (escaped), and none for an edit without one
    assert "why +step check <args> (workflow_step_append): wrong_value 298 <b>x</b>" in text and "why model=" not in text
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "Workload check ( evoharness doctor ): passed every gate on all 793 tasks (the record the workload's package ships" in text
    for state, words in (({"passed": False}, "FAILED its last run"), ({"passed": None}, "never run on this workload"),
                         ({"passed": True, "tasks_checked": 12, "tasks_total": 199}, "passed on 12 of its 199 tasks only")):
        summary["doctor"] = state
        assert words in " ".join(visible_text(render_report(summary)).split())
    del summary["doctor"]
    assert "not recorded" in visible_text(render_report(summary))
    # a hand-edited page that would leave the study's folder, or run script, is no link at all
    for page in ("javascript:alert(1)//", "/etc/passwd", "../../x/0123456789ab-dev.html", "transcripts/0123456789ab-dev.html?x"):
        summary["front"][0]["transcripts"]["page"] = page
        hrefs = [a.get("href") or "" for t, a in parse(render_report(summary)).starts if t == "a"]
        assert hrefs == ["transcripts/ba9876543210-train.html"], page
