"""The transcript viewer's page and the study's choice of what to show side by side."""
from __future__ import annotations

import gzip
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.trajectory import ModelCallRecord, Trajectory
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.records import transcripts
from evoharness.search.records.transcript_view import Side, pick_sides, render_view
from evoharness.search.records.versions import versioned

HOSTILE = '</script><script>document.title="owned"</script><!-- {{ 7*7 }} {% raw %} ]]> & \u2028'


class Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = None


def episode(task: str, *, passed: bool, text: str = "done", system: str = "You are the desk.") -> dict[str, Any]:
    return versioned("transcript", {
        "task_id": task, "sample": 0, "status": "scored", "passed": passed, "score": float(passed), "detail": "",
        "failures": [] if passed else [{"kind": "wrong_value", "tool": "refund", "argument": "amount", "expected": 5, "got": 6,
                                        "turn": 0}],
        "end": "completed", "infra_error": None, "cost_usd": 0.01, "latency_s": 0.5, "prompt_tokens": 10, "completion_tokens": 2,
        "calls": [], "messages": [{"role": "system", "content": system}, {"role": "user", "content": "refund A-1"},
                                  {"role": "assistant", "content": text}]})


def test_the_page_carries_hostile_text_as_data_and_runs_none_of_it() -> None:
    sides = [Side("incumbent", "a" * 64, "dev", "evals/a.json", {"pass_rate": 0.5}, (episode("t1", passed=True, text=HOSTILE),)),
             Side("champion", "b" * 64, "dev", "evals/b.json", {"pass_rate": 1.0}, (episode("t1", passed=False, system=HOSTILE),))]
    page = render_view(sides, title=HOSTILE)
    parser = Scripts()
    parser.feed(page)
    # exactly the page's two script elements: the data and the viewer; the reply's own tags opened none
    assert [a.get("type") for a, _ in parser.scripts] == ["application/json", None]
    data = json.loads(parser.scripts[0][1])
    assert data["sides"][0]["episodes"][0]["messages"][2]["content"] == HOSTILE  # shown as the text it is
    assert data["strings"][data["sides"][1]["episodes"][0]["messages"][0]["ref"]] == HOSTILE
    assert data["title"] == HOSTILE
    assert "<title>evoharness transcripts – &lt;/script&gt;" in page  # the title is escaped, not a template
    assert "49" not in page.split("<script", 1)[0]  # {{ 7*7 }} was never evaluated
    assert "innerHTML" not in page and "eval(" not in page


def test_the_system_prompt_is_kept_once_per_text() -> None:
    sides = [Side("a", "a" * 64, "dev", "a.json", {}, tuple(episode(f"t{i}", passed=True) for i in range(5)))]
    parser = Scripts()
    parser.feed(render_view(sides, title="t"))
    data = json.loads(parser.scripts[0][1])
    assert data["strings"] == ["You are the desk."]
    assert {m["ref"] for e in data["sides"][0]["episodes"] for m in e["messages"] if m["role"] == "system"} == {0}


SUMMARY = {"baseline": {"variant_hash": "base" + "0" * 60},
           "champion": {"variant_hash": "base" + "0" * 60},
           "front": [{"trial": 0, "variant_hash": "base" + "0" * 60, "dev": {"pass_rate": 0.8}},
                     {"trial": 3, "variant_hash": "c3" + "1" * 62, "dev": {"pass_rate": 0.7}},
                     {"trial": 7, "variant_hash": "c7" + "2" * 62, "dev": {"pass_rate": 0.9}},
                     {"trial": 9, "variant_hash": "c9" + "3" * 62}],
           "trials": [{"trial": 11, "variant_hash": "cb" + "4" * 62}]}


def test_a_kept_incumbent_is_shown_beside_its_best_challenger_on_dev() -> None:
    assert pick_sides(SUMMARY) == [("incumbent", "base" + "0" * 60), ("trial 7 (best challenger on dev)", "c7" + "2" * 62)]
    won = {**SUMMARY, "champion": {"variant_hash": "c3" + "1" * 62}}
    assert pick_sides(won) == [("incumbent", "base" + "0" * 60), ("champion", "c3" + "1" * 62)]
    assert pick_sides(SUMMARY, ["cb"]) == [("incumbent", "base" + "0" * 60), ("trial 11", "cb" + "4" * 62)]
    assert pick_sides(SUMMARY, ["c3", "c9"]) == [("trial 3", "c3" + "1" * 62), ("trial 9", "c9" + "3" * 62)]
    for bad in ("c", "zz", "../"):
        with pytest.raises(ConfigError, match="--variant"):
            pick_sides(SUMMARY, [bad])


def test_blocks_concatenate_into_one_sidecar_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    one = gzip.compress((json.dumps(episode("t1", passed=True)) + "\n").encode())
    two = gzip.compress((json.dumps(episode("t2", passed=False)) + "\n").encode())
    record = tmp_path / "x.json"
    transcripts.write(record, transcripts.concatenated([one, two]))
    assert transcripts.sidecar(record).name == "x.transcripts.jsonl.gz"
    assert [t["task_id"] for t in transcripts.read(record)] == ["t1", "t2"]
    transcripts.sidecar(record).write_bytes(one[:-9])  # cut short, as a killed copy leaves it
    with pytest.raises(ConfigError, match="x.transcripts.jsonl.gz"):
        transcripts.read(record)
    transcripts.sidecar(record).write_bytes(gzip.compress(json.dumps({**episode("t1", passed=True), "schema_version": 9}).encode()))
    with pytest.raises(ConfigError, match="schema_version"):
        transcripts.read(record)
    assert transcripts.read(tmp_path / "none.json") == []


def test_long_text_keeps_its_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "H" * 5000 + "M" * 5000 + "T" * 5000
    cut = transcripts.clipped(text)
    assert cut.startswith("H" * 100) and cut.endswith("T" * 100)
    assert f"[… {15000 - transcripts.MAX_MESSAGE_CHARS} characters cut …]" in cut
    assert len(cut) < transcripts.MAX_MESSAGE_CHARS + 60
    assert transcripts.clipped("short") == "short"


def test_every_transcript_key_is_documented() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "outputs.md").read_text(encoding="utf-8")
    section = docs.split("## Transcripts", 1)[1].split("\n## ", 1)[0]
    call = ModelCallRecord(turn=0, prompt_tokens=1, completion_tokens=1, cost_usd=0.0, latency_s=0.1, finish_reason="stop")
    messages = ({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                                      "function": {"name": "refund", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"})
    played = Trajectory(task_id="t", sample=0, seed=0, variant_hash="h", status="completed", model_calls=(call,), messages=messages)
    line = transcripts.transcript(EpisodeResult.from_episode(played, None), played)
    keys = {*line, *line["calls"][0], *(k for m in line["messages"] for k in m), *line["messages"][0]["tool_calls"][0]}
    assert sorted(k for k in keys if f"`{k}`" not in section) == []
