"""`evoharness view <study | eval.json ...>`: the transcripts of a search or of evaluations, side by
side, as one self-contained HTML page; prints its path."""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from evoharness.compiler.errors import ConfigError, OneLineParser
from evoharness.compiler.names import is_name
from evoharness.compiler.secrets import scrub

DESCRIPTION = """Show what the agent did, episode by episode: each task's conversation (messages, tool calls and
their results), the scorer's verdict and failures, and each model call's tokens, cost and latency,
with two evaluations side by side on the same task. Filter by task, by outcome (failed on any side,
sides differ) and by failure kind.

A study (a search's name under --runs) shows the incumbent beside the champion, or, when the
incumbent stays, beside the front member that did best on dev; --variant picks others. Paths to one
or two eval.json files written by `evoharness evaluate` (or their folders) show those.

examples:
  evoharness view bfcl_agent
  evoharness view bfcl_agent --split train --variant 52e5d96f
  evoharness view runs/evaluate/2026-12-05_10-00-00/eval.json runs/evaluate/2026-12-05_10-05-00/eval.json"""


def view_main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from evoharness.search.records.transcript_view import Side, evaluation_side, pick_sides, study_sides, write_view
    from evoharness.search.records.versions import checked

    parser = OneLineParser(prog="evoharness view", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", nargs="+", help="a study's name, or one or two eval.json files (or their folders)")
    parser.add_argument("--runs", default="runs", help="output root holding <study>/ (default: runs)")
    # the holdout stays sealed here too: read task by task, it would become one more dev split
    parser.add_argument("--split", choices=("train", "dev"), default="dev", help="a study's evaluations on this split (default: dev)")
    parser.add_argument("--variant", action="append", default=[], metavar="HASH",
                        help="a variant hash prefix from the study (once: beside the incumbent; twice: these two)")
    parser.add_argument("--out", help="where to write the page (default: beside the study or the first record)")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help or a usage error: argparse already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    try:
        if len(args.target) > 2 or len(args.variant) > 2:
            raise ConfigError("evoharness view", "shows at most two evaluations side by side", "name one or two")
        if len(set(args.target)) < len(args.target) or len(set(args.variant)) < len(args.variant):
            raise ConfigError("evoharness view", "was given the same evaluation twice", "name two different ones, or one")
        records = [_record_path(t) for t in args.target]
        if all(r is not None for r in records):
            first = records[0]
            assert first is not None
            page = Path(args.out) if args.out else first.parent / "transcripts.html"
            sides: list[Side] = [evaluation_side(r, page=page) for r in records if r is not None]
            title = " vs ".join(s.source for s in sides)
        elif len(args.target) == 1 and is_name(args.target[0]):
            study = Path(args.runs) / args.target[0]
            source = study / "summary.json"
            if not source.is_file():
                raise ConfigError(str(source), "does not exist",
                                  f"run `evoharness search search.study={args.target[0]}` first, or give --runs for its folder")
            try:
                summary = checked("summary", json.loads(source.read_text(encoding="utf-8")), source)
            except (OSError, ValueError, RecursionError) as exc:
                raise ConfigError(str(source), f"cannot be read ({exc})", f"rerun `evoharness search search.study={args.target[0]}`") \
                    from None
            page = Path(args.out) if args.out else study / "transcripts.html"
            try:
                chosen = pick_sides(summary, args.variant)
            except ConfigError:  # a --variant that names no variant, or several
                raise
            except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a summary of the wrong shape
                raise ConfigError(str(source), f"is not a search summary this view can read ({type(exc).__name__}: {exc})",
                                  f"rerun `evoharness search search.study={args.target[0]}`") from None
            if len({v for _, v in chosen}) < len(chosen):
                raise ConfigError("--variant", "names the same variant as the other side", "name two different ones, or one")
            sides = []
            for (label, variant), side in zip(chosen, study_sides(study / "evals", chosen, args.split, page=page)):
                if side is None:
                    raise ConfigError(f"--split {args.split}", f"the study holds no evaluation of {label} ({variant[:12]}) on "
                                      f"{args.split} with transcripts", "choose another --split (train: every trial ran it), or "
                                      "another --variant; a study searched before transcripts were kept has none")
                sides.append(side)
            title = f"{args.target[0]} ({args.split})"
        else:
            bad = next(t for t, r in zip(args.target, records) if r is None)
            raise ConfigError("evoharness view", f"{bad!r} is neither a study's name nor an eval.json (or a folder holding one)",
                              "give a study's name (search.study) or the path of an evaluate record")
        print(write_view(sides, page, title=title))
    except ConfigError as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    return 0


def _record_path(target: str) -> Path | None:
    path = Path(target)
    if path.is_dir() and (path / "eval.json").is_file():
        return path / "eval.json"
    if path.is_file() and path.suffix == ".json":
        return path
    return None
