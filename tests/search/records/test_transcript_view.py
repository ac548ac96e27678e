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
    assert f"[… {15000 - transcripts.MAX_MESSAGE_CHARS + 48} characters cut …]" in cut
    assert len(cut) <= transcripts.MAX_MESSAGE_CHARS and transcripts.clipped(cut) == cut  # a block's lines, merged, stay as they were
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


QUOTED = 'Qx7\\Lm9"Rt4pZk2Wv8Nb3Hy6Jc1Fd5Gs0Ae7Ui9'  # a value with JSON's escapes in it


def played_with(text: str) -> tuple[EpisodeResult, Trajectory]:
    messages = ({"role": "system", "content": text}, {"role": "user", "content": "go"}, {"role": "assistant", "content": text})
    call = ModelCallRecord(turn=0, prompt_tokens=1, completion_tokens=1, cost_usd=0.0, latency_s=0.1, finish_reason="stop")
    t = Trajectory(task_id="t", sample=0, seed=0, variant_hash="h", status="completed", model_calls=(call,), messages=messages)
    return EpisodeResult.from_episode(t, None), t


@pytest.mark.parametrize("text", [f"team {QUOTED}", "p" * 3951 + f" team {QUOTED} " + "q" * 2500],
                         ids=["escaped-in-json", "across-the-clip"])
def test_a_secret_is_scrubbed_whole_before_anything_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    from evoharness.compiler import secrets

    monkeypatch.setattr(secrets, "_KNOWN", {})
    monkeypatch.setenv("TEAM_TOKEN", QUOTED)
    secrets.remember_env("TEAM_TOKEN")
    result, played = played_with(text)
    record = tmp_path / "eval.json"
    transcripts.write(record, transcripts.pack([result], [played]))  # packed where the secret was not known
    raw = gzip.decompress(transcripts.sidecar(record).read_bytes()).decode("utf-8")
    for fragment in (QUOTED, json.dumps(QUOTED)[1:-1], QUOTED[:30], json.dumps(QUOTED)[1:31]):
        assert fragment not in raw
    assert ("team ${oc.env:TEAM_TOKEN}" in raw) == (len(text) < transcripts.MAX_MESSAGE_CHARS)  # the marker, unless cut itself


def test_a_forged_line_is_refused(tmp_path: Path) -> None:
    record = tmp_path / "x.json"
    transcripts.sidecar(record).write_bytes(gzip.compress(b'{"schema_version":1}\n'))
    with pytest.raises(ConfigError, match="not an episode's transcript"):
        transcripts.read(record)


def evaluate_record(folder: Path, model: str) -> Path:
    """An evaluate record and its sidecar, as `evoharness evaluate` leaves them."""
    folder.mkdir(parents=True)
    record = folder / "eval.json"
    record.write_text(json.dumps(versioned("eval", {"variant_hash": model[-1] * 64, "split": "dev", "model": model,
                                                     "metrics": {"pass_rate": 0.5}, "episodes": [{"task_id": "t1"}, {"task_id": "t2"}]})))
    lines = "".join(json.dumps(episode(t, passed=p)) + "\n" for t, p in (("t1", True), ("t2", False)))
    transcripts.write(record, gzip.compress(lines.encode()))
    return record


def test_view_writes_only_its_own_pages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evoharness.search.cli.view import view_main

    a, b = evaluate_record(tmp_path / "a", "sim/small"), evaluate_record(tmp_path / "b", "sim/large")
    assert view_main([str(a), str(b.parent)]) == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == tmp_path / "a" / "transcripts.html"
    data = json.loads(page.read_text().split('id="data">', 1)[1].split("</script>", 1)[0])
    assert [s["label"] for s in data["sides"]] == ["sim/small llllllllll (a)", "sim/large eeeeeeeeee (b)"]
    assert view_main([str(a), str(b), "--out", str(page)]) == 0  # its own page: written again
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for out, why in ((a, "is not an .html file"), (transcripts.sidecar(a), "is not an .html file"),
                     (tmp_path / "a", "is not an .html file"), (tmp_path / "report.html", "is not a page `evoharness view` wrote"),
                     (a / "x.html", "cannot be written")):
        if out.name == "report.html":
            out.write_text("<html>the search's report</html>")
            before[out] = out.read_bytes()
        assert view_main([str(a), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing it read was written over
    assert view_main([str(a), str(a)]) == 2 and "the same evaluation twice" in capsys.readouterr().err
    transcripts.sidecar(b).write_bytes(gzip.compress((json.dumps(episode("t1", passed=True)) + "\n").encode()))  # t2 missing
    assert view_main([str(b)]) == 2 and "has incomplete transcripts" in capsys.readouterr().err
    assert view_main(["s", "--split", "holdout"]) == 2 and "invalid choice: 'holdout'" in capsys.readouterr().err
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "summary.json").write_text(json.dumps(versioned("summary", SUMMARY)))
    assert view_main(["s", "--runs", str(tmp_path), "--variant", "zz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --variant: 'zz' names 0 of the study's variants") and err.count("\n") == 1, err
