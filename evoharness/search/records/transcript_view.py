"""The transcript viewer: one self-contained HTML page showing the episodes of one or two
evaluations, task by task, side by side (records/transcripts.py keeps them).

Pure core (``Side``, ``pick_sides``, ``render_view``) under a thin I/O layer (``evaluation_sides``,
``study_sides``, ``write_view``; the command is search/cli/view.py). The page holds its data as
JSON in a script element and renders it with text nodes only: a model's reply or a tool's output
that looks like HTML or script is shown as the text it is.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.errors import ConfigError
from evoharness.search.records import transcripts
from evoharness.search.records.versions import checked


@dataclass(frozen=True)
class Side:
    """One evaluation shown in a column: who it is, where it came from, and its transcripts."""

    label: str  # "incumbent", "champion", a file's folder …
    variant_hash: str
    split: str
    source: str  # the evaluation record, relative to where the page is written
    metrics: Mapping[str, Any] = field(default_factory=dict)
    episodes: tuple[Mapping[str, Any], ...] = ()


def _interned(sides: Sequence[Side]) -> tuple[list[str], list[dict[str, Any]]]:
    """The sides as page data, each system prompt stored once (it is the same for most episodes of
    a variant, and the largest message of each)."""
    strings: list[str] = []
    index: dict[str, int] = {}
    out = []
    for side in sides:
        episodes = []
        for e in side.episodes:
            messages = []
            for m in e.get("messages", ()):
                if m.get("role") == "system":
                    text = str(m.get("content", ""))
                    m = {**m, "content": None, "ref": index.setdefault(text, len(index))}
                    if m["ref"] == len(strings):
                        strings.append(text)
                messages.append(m)
            episodes.append({**e, "messages": messages})
        out.append({"label": side.label, "variant": side.variant_hash, "split": side.split, "source": side.source,
                    "metrics": {k: side.metrics.get(k) for k in ("pass_rate", "cost_per_task", "latency_p50", "tool_error_rate")
                                if k in side.metrics},
                    "episodes": episodes})
    return strings, out


def page_data(sides: Sequence[Side], *, title: str) -> str:
    """The page's data as JSON that is safe inside a script element."""
    strings, data = _interned(sides)
    text = json.dumps({"title": title, "strings": strings, "sides": data}, ensure_ascii=False, separators=(",", ":"))
    # no "</script>", "<!--" or "]]>" can end the element early: each "<", ">" and "&" is a JSON escape
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return ImmutableSandboxedEnvironment(loader=jinja2.PackageLoader("evoharness.search.records", "templates"), autoescape=True,
                                         undefined=jinja2.StrictUndefined)


def render_view(sides: Sequence[Side], *, title: str) -> str:
    """The whole viewer page as a string: self-contained, opens offline."""
    return _env().get_template("transcripts.html.j2").render(title=title, data=Markup(page_data(sides, title=title)))


def pick_sides(summary: Mapping[str, Any], wanted: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(label, variant hash) of the columns a study's page shows. ``wanted``: hash prefixes chosen
    by the user (one is shown beside the incumbent). Otherwise the incumbent and the champion, or,
    when the incumbent stays, the front member that did best on dev (its nearest challenger)."""
    base = str((summary.get("baseline") or {}).get("variant_hash") or "")
    front = [m for m in summary.get("front") or () if m.get("variant_hash")]
    members = {str(m["variant_hash"]): m for m in [*(summary.get("trials") or ()), *front] if m.get("variant_hash")}
    if wanted:
        chosen = []
        for prefix in wanted:
            hits = sorted(h for h in {*members, base} if h.startswith(prefix))
            if len(hits) != 1:
                raise ConfigError("--variant", f"{prefix!r} names {len(hits)} of the study's variants",
                                  "give a longer prefix of a variant hash from the summary's front or trials")
            chosen.append(hits[0])
        if len(chosen) == 1 and chosen[0] != base:
            chosen.insert(0, base)
        return [("incumbent" if h == base else f"trial {members[h].get('trial', '?')}", h) for h in chosen]
    champion = str((summary.get("champion") or {}).get("variant_hash") or "")
    if champion and champion != base:
        return [("incumbent", base), ("champion", champion)]
    others = [m for m in front if m["variant_hash"] != base]
    if not others:
        return [("incumbent", base)]

    def dev_quality(m: Mapping[str, Any]) -> float:
        q = (m.get("dev") or {}).get("pass_rate")
        return float(q) if isinstance(q, (int, float)) else float("-inf")

    best = max(others, key=dev_quality)
    return [("incumbent", base), (f"trial {best.get('trial', '?')} (best challenger on dev)", str(best["variant_hash"]))]


# ---------------------------------------------------------------- I/O

GENERATOR = '<meta name="generator" content="evoharness view">'  # a file without it is not one this command may overwrite


def _record(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        raise ConfigError(str(path), f"is not an evaluation record ({type(exc).__name__}: {exc})",
                          "point at an eval.json that `evoharness evaluate` wrote, or a study's name") from None


def _complete(record: Path, rows: Any, episodes: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the transcripts cover every task the record evaluated (a repeat that stood in has none
    of its own; a task with none at all means the sidecar is not the whole record's)."""
    tasks = {str(r.get("task_id")) for r in rows or () if isinstance(r, Mapping)}
    return bool(tasks) and tasks <= {str(e["task_id"]) for e in episodes}


def evaluation_side(record: Path, *, page: Path) -> Side:
    """An ``evoharness evaluate`` record (eval.json) and its transcripts, labelled by its model,
    variant and folder."""
    d = checked("eval", _record(record), record)
    episodes = transcripts.read(record)
    if not episodes or not _complete(record, d.get("episodes"), episodes):
        raise ConfigError(str(record), f"has {'no' if not episodes else 'incomplete'} transcripts beside it",
                          f"evaluate again with this evoharness (it keeps them in {transcripts.sidecar(record).name})")
    variant = str(d.get("variant_hash", ""))
    return Side(label=f"{d.get('model', '?')} {variant[:10]} ({record.parent.name})", variant_hash=variant,
                split=str(d.get("split", "")), source=os.path.relpath(record, page.parent), metrics=dict(d.get("metrics") or {}),
                episodes=tuple(episodes))


def study_sides(evals: Path, chosen: Sequence[tuple[str, str]], split: str, *, page: Path) -> list[Side | None]:
    """For each (label, variant hash) in ``chosen``: the study's fullest evaluation of it on
    ``split`` that kept transcripts (a raced proposal's blocks are evaluations too: the one with the
    most episodes is the whole), or None. The study's records are read once for all of them."""
    wanted = {h for _, h in chosen}
    best: dict[str, tuple[int, Path, dict[str, Any]]] = {}
    for path in sorted(evals.glob("*.json")):
        if not transcripts.sidecar(path).exists():
            continue
        d = _record(path)
        h, report = d.get("variant_hash"), d.get("report")
        # a record of another shape is none of the study's evaluations: left out, never a crash
        if not isinstance(h, str) or h not in wanted or d.get("split") != split or not isinstance(report, dict) \
                or not isinstance(report.get("episodes"), list):
            continue
        n = len(report["episodes"])
        if h not in best or n > best[h][0]:
            best[h] = (n, path, d)
    return [None if h not in best else _study_side(label, h, split, *best[h][1:], page=page) for label, h in chosen]


def _study_side(label: str, variant_hash: str, split: str, path: Path, d: Mapping[str, Any], *, page: Path) -> Side:
    episodes = transcripts.read(path)
    if not _complete(path, (d.get("report") or {}).get("episodes"), episodes):
        raise ConfigError(str(transcripts.sidecar(path)), f"does not cover every task of {path.name} (part of it was evaluated "
                          "by an evoharness that kept no transcripts)", "delete the record and the sidecar; a resumed search "
                          "evaluates them again, with transcripts")
    return Side(label=label, variant_hash=variant_hash, split=split, source=os.path.relpath(path, page.parent),
                metrics=dict((d.get("report") or {}).get("metrics") or {}), episodes=tuple(episodes))


def write_view(sides: Sequence[Side], path: Path, *, title: str) -> Path:
    """Render and write atomically; a render error leaves any earlier page in place. Only a new
    ``.html`` file, or a page this command wrote, is written: never a record it read, nor a report."""
    fix = "give --out a new .html file"
    if path.suffix != ".html":
        raise ConfigError(f"--out {path}", "is not an .html file", fix)
    if path.is_dir():
        raise ConfigError(f"--out {path}", "is a folder", fix)
    if path.exists():
        try:
            ours = GENERATOR in path.read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            ours = False
        if not ours:
            raise ConfigError(f"--out {path}", "exists and is not a page `evoharness view` wrote", fix)
    page = render_view(sides, title=title)
    try:
        return write_text_atomic(path, page)
    except OSError as exc:
        raise ConfigError(f"--out {path}", f"cannot be written ({exc.strerror or exc})", fix) from None
