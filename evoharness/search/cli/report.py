"""`evoharness report <study> [--runs DIR]`: summary.json in, report.html out; prints its path."""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from evoharness.compiler.errors import ConfigError, OneLineParser
from evoharness.compiler.names import is_name
from evoharness.compiler.secrets import scrub
from evoharness.search.records.report import write_report
from evoharness.search.records.versions import checked


def report_main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="evoharness report", description="render the HTML report of a search study")
    parser.add_argument("study")
    parser.add_argument("--runs", default="runs", help="output root holding <study>/summary.json (default: runs)")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help or a usage error: argparse already printed
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if not is_name(args.study):
        print(f"error: study {args.study!r} is not a plain name (a study is a folder under --runs). "
              f"Fix: give the search.study name, e.g. bfcl, and --runs for its folder", file=sys.stderr)
        return 2
    source = Path(args.runs) / args.study / "summary.json"
    if not source.is_file():
        print(f"error: no search summary at {source}; run `evoharness search` with search.study={args.study} first", file=sys.stderr)
        return 2
    try:
        summary = checked("summary", json.loads(source.read_text(encoding="utf-8")), source)
    except ConfigError as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RecursionError) as exc:
        print(f"error: cannot read search summary at {source} ({exc}); rerun `evoharness search` with search.study={args.study}",
              file=sys.stderr)
        return 2
    try:
        print(write_report(summary, source.parent / "report.html"))
    except IsADirectoryError as exc:
        print(f"error: {exc.filename} is a folder, not the report file. Fix: move it away and run `evoharness report` again",
              file=sys.stderr)
        return 2
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:  # a summary of the wrong shape
        print(f"error: {source} is not a search summary this report can render ({type(exc).__name__}: {exc}); "
              f"rerun `evoharness search` with search.study={args.study}", file=sys.stderr)
        return 2
    return 0
