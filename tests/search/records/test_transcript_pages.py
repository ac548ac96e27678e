"""The pages a search's finish writes for its report: each front member beside the incumbent, its
failed tasks listed with the ones the incumbent passed first, and nothing a forged record or a
folder pointing elsewhere can turn into a crash of the finish or a file outside the study."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from evoharness.search.records import transcripts
from evoharness.search.records.transcript_pages import front_pages
from evoharness.search.records.versions import versioned
from tests.search.records.test_transcript_view import episode

INCUMBENT, MEMBER, OTHER = "a" * 64, "b" * 64, "c" * 64


def stored(evals: Path, name: str, variant: str, split: str, passed: dict[str, bool]) -> None:
    """A study's stored evaluation and its sidecar, as the orchestrator leaves them."""
    record = evals / f"{name}.json"
    rows = [{"task_id": t, "sample": 0, "passed": p} for t, p in passed.items()]
    record.write_text(json.dumps(versioned("trial_result", {"label": name, "variant_hash": variant, "split": split,
                                                       "report": {"metrics": {"pass_rate": 0.5}, "episodes": rows}})))
    lines = "".join(json.dumps(episode(t, passed=p)) + "\n" for t, p in passed.items())
    transcripts.write(record, gzip.compress(lines.encode()))


def study(tmp_path: Path) -> Path:
    evals = tmp_path / "s" / "evals"
    evals.mkdir(parents=True)
    stored(evals, "inc-dev", INCUMBENT, "dev", {"t1": True, "t2": False, "t3": True})
    stored(evals, "mem-dev", MEMBER, "dev", {"t1": False, "t2": False, "t3": False})
    stored(evals, "inc-train", INCUMBENT, "train", {"t9": True})
    stored(evals, "oth-train", OTHER, "train", {"t9": False})
    return tmp_path / "s"


def test_each_member_gets_its_page_and_its_failures_those_the_incumbent_passed_first(tmp_path: Path) -> None:
    s = study(tmp_path)
    pages = front_pages(s, baseline=INCUMBENT, members=[("trial 1", MEMBER, True), ("trial 2", OTHER, False),
                                                        ("incumbent", INCUMBENT, True)])
    assert pages[MEMBER] == {"page": "transcripts/bbbbbbbbbbbb-dev.html", "split": "dev", "failed": ["t1", "t3", "t2"]}
    assert pages[OTHER] == {"page": "transcripts/cccccccccccc-train.html", "split": "train", "failed": ["t9"]}
    assert INCUMBENT not in pages and sorted(p.name for p in (s / "transcripts").iterdir()) == [
        "bbbbbbbbbbbb-dev.html", "cccccccccccc-train.html"]
    text = (s / pages[MEMBER]["page"]).read_text(encoding="utf-8")
    assert "../evals/mem-dev.json" in text and str(tmp_path) not in text  # records named from the page's folder


def test_forged_records_are_left_out_and_the_rest_still_get_pages(tmp_path: Path) -> None:
    s = study(tmp_path)
    forged: list[dict[str, Any]] = [{"variant_hash": [1], "split": "dev", "report": {}},
                                    {"variant_hash": MEMBER, "split": "dev", "report": [1]},
                                    {"variant_hash": MEMBER, "split": "dev", "report": {"episodes": 5}}]
    for i, body in enumerate(forged):
        (s / "evals" / f"zz{i}.json").write_text(json.dumps(versioned("trial_result", body)))
        transcripts.write(s / "evals" / f"zz{i}.json", gzip.compress(b""))
    pages = front_pages(s, baseline=INCUMBENT, members=[("trial 1", MEMBER, True)])
    assert pages[MEMBER]["failed"] == ["t1", "t3", "t2"]


def test_a_transcripts_folder_that_points_elsewhere_gets_no_page(tmp_path: Path) -> None:
    s = study(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (s / "transcripts").symlink_to(outside)
    assert front_pages(s, baseline=INCUMBENT, members=[("trial 1", MEMBER, True)]) == {}
    assert list(outside.iterdir()) == []
    (s / "transcripts").unlink()
    (s / "transcripts").write_text("a file", encoding="utf-8")
    assert front_pages(s, baseline=INCUMBENT, members=[("trial 1", MEMBER, True)]) == {}
