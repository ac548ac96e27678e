"""`evoharness cache {path,stats,clear}`: where the response cache is, what it holds, and emptying it
(every entry, or those older than N days). Only files laid out as cache entries are ever counted or
removed: a folder given by mistake loses nothing else."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from evoharness.compiler.errors import OneLineParser
from evoharness.compiler.runtime.cache import ResponseCache, is_url
from evoharness.compiler.secrets import public_url

DESCRIPTION = """The response cache keeps every model reply (and every episode whose replies it all holds), so a
rerun of the same evaluation bills nothing. It grows with every new call; these look at it and empty it.

  path    print the cache's location
  stats   entries, bytes, oldest and newest, replies and episodes apart
  clear   remove entries (all, or --older-than DAYS); without --yes it only says what it would remove

A later run that misses an entry asks the model again (and pays for it): nothing else is lost."""


def cache_main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="evoharness cache", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("path", "stats", "clear"))
    parser.add_argument("--dir", default="runs/cache", help="the cache folder, as cache_dir names it (default: runs/cache)")
    parser.add_argument("--older-than", type=float, metavar="DAYS", help="clear only entries not written for this many days")
    parser.add_argument("--yes", action="store_true", help="clear: remove them (without it, only count them)")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if is_url(args.dir):
        if args.action == "path":
            print(public_url(args.dir))
            return 0
        print(f"error: {public_url(args.dir)} is a shared cache on a server. Fix: look at it with the server's own tools "
              "(redis-cli); stats and clear read a cache folder", file=sys.stderr)
        return 2
    root = Path(args.dir)
    if args.action == "path":
        print(root.absolute())
        return 0
    if root.exists() and not root.is_dir():
        print(f"error: --dir {root} is a file, not a cache folder. Fix: give the folder cache_dir names", file=sys.stderr)
        return 2
    if args.older_than is not None and not args.older_than >= 0:  # NaN too
        print(f"error: --older-than {args.older_than} is not a number of days. Fix: give 0 or more", file=sys.stderr)
        return 2
    cutoff = None if args.older_than is None else time.time() - args.older_than * 86400
    rows = []
    for kind, path in ResponseCache(root).entries():
        try:
            st = path.stat()
        except FileNotFoundError:  # another process cleared it meanwhile
            continue
        if cutoff is None or st.st_mtime < cutoff:
            rows.append((kind, path, st.st_size, st.st_mtime, st.st_blocks * 512))
    if args.action == "stats":
        for kind, name in (("reply", "replies"), ("episode", "episodes")):
            mine = [r for r in rows if r[0] == kind]
            span = (f", {_age(min(r[3] for r in mine))} to {_age(max(r[3] for r in mine))} old" if mine else "")
            print(f"{name}: {len(mine)} entries, {_size(sum(r[2] for r in mine))} ({_size(sum(r[4] for r in mine))} on disk){span}")
        print(f"in {root.absolute()}")
        return 0
    which = "" if args.older_than is None else f" older than {args.older_than:g} days"
    if not args.yes:
        print(f"would remove {len(rows)} entries{which} ({_size(sum(r[2] for r in rows))}) from {root.absolute()}; "
              "run again with --yes to remove them")
        return 0
    removed = 0
    for _, path, size, _, _ in rows:
        try:
            path.unlink()
            removed += size
        except FileNotFoundError:
            continue
    print(f"removed {len(rows)} entries{which} ({_size(removed)}) from {root.absolute()}")
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _age(mtime: float) -> str:
    seconds = max(0.0, time.time() - mtime)
    return f"{seconds / 86400:.1f} days" if seconds >= 86400 else f"{seconds / 3600:.1f} hours"
