"""`evoharness promote | versions | rollback` (argparse) and the `snapshot` Hydra task.

Every error is one line on stderr starting ``error: `` with exit code 2, raised before anything is
written, so a failed command leaves the registry as it was.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from omegaconf import DictConfig

from evoharness.compiler.release.registry import DEFAULT_ROOT, DEFAULT_SLOT, Registry, check_slot
from evoharness.compiler.release.snapshot import RegistryError, Snapshot
from evoharness.compiler.secrets import scrub
from evoharness.search.cli.claim_trust import nothing_to_promote, second_look_refusal, study_folder, study_records, trusted_verdict
from evoharness.search.cli.releasable import check_releasable
from evoharness.search.records.format import fmt_metric


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage + exits 2 over several lines
        raise RegistryError(f"{message}. Fix: see `{self.prog} --help`")


def _parser(command: str, description: str) -> _Parser:
    parser = _Parser(prog=f"evoharness {command}", description=description)
    parser.add_argument("--registry", default=DEFAULT_ROOT, metavar="DIR", help=f"registry root (default {DEFAULT_ROOT})")
    return parser


def _registry(root: str) -> Registry:
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise RegistryError(f"--registry {root} is a file, not a registry folder. Fix: pass the registry's folder (default {DEFAULT_ROOT})")
    if path.is_dir() and any(path.iterdir()) and not ((path / "snapshots").is_dir() or (path / "promotions.json").is_file()):
        raise RegistryError(f"--registry {root} holds files but no snapshots/ or promotions.json: it is not a registry. "
                            f"Fix: pass the registry's folder (default {DEFAULT_ROOT})")
    return Registry(root)


def _run(body: Callable[[list[str]], int], argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(args)
    except RegistryError as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
    except OSError as exc:
        print(f"error: {exc.filename or 'registry'}: {exc.strerror or exc}. Fix: check the --registry path and its permissions",
              file=sys.stderr)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    return 2


def _promote(argv: list[str]) -> int:
    parser = _parser("promote", "Promote a snapshot into a release slot; the next compile ships it. Before the slot moves, the "
                                "snapshot is compiled in the release config: the primary config with any overrides given after "
                                "the ref (key=value, as given to compile).")
    parser.add_argument("ref", help="full hash, unique prefix (>= 6 hex chars) or path to a snapshot .json")
    parser.add_argument("--class", dest="slot", default=DEFAULT_SLOT, help="release slot, e.g. fast (default: default)")
    parser.add_argument("--by", default="manual", help="who promotes (recorded in the history)")
    parser.add_argument("--force", action="store_true", help="promote even when the snapshot's holdout claim is not a win, or "
                                                              "(with --if-win) a win claimed on a second look at its holdout")
    parser.add_argument("--if-win", action="store_true",
                        help="promote only a study's champion whose claim the study's own database records as a win, and "
                             "which the search stored in this registry; when the study's records agree it is not a win, say "
                             "so and exit 0")
    parser.add_argument("--runs", default=None, metavar="DIR",
                        help="output root holding <study>/ for --if-win (default: the folder of a ref given as "
                             "runs/<study>/champion.json, else runs)")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="for --if-win: the study's Optuna storage URL with its password, when search.storage needed one "
                             "(its records mask it)")
    args, rest = parser.parse_known_args(argv)
    flags = [a for a in rest if a.startswith("-")]
    if flags:
        parser.error(f"unrecognized arguments: {' '.join(flags)}")
    check_slot(args.slot)  # before any lookup: the slot is a bad argument whatever the ref is
    registry = _registry(args.registry)
    path = Path(args.ref)
    if args.if_win and (os.sep in args.ref or args.ref.endswith(".json")) and not path.exists():
        # only the study's own champion.json may be absent (the incumbent stayed); any other path is a mistake
        print(nothing_to_promote(path, storage=args.storage))
        return 0
    snapshot = registry.load(args.ref)
    verdict: str | None
    second: str | None = None
    if args.if_win:
        records = study_records(study_folder(args.ref, snapshot, args.runs), storage=args.storage)
        verdict = trusted_verdict(snapshot, records, registry)
        if verdict != "win":
            print(f"nothing promoted: study {records.study!r} records holdout verdict {verdict!r}, not a win")
            return 0
        if records.second_look:
            if not args.force:
                raise RegistryError(second_look_refusal(snapshot, records))
            second = (f"shipped a second-look win (--force): study {records.study!r} claimed it on look {records.looks or '2 or later'} "
                      "at its sealed holdout, so its interval overstates it")
    else:
        verdict = (snapshot.provenance.get("claim") or {}).get("verdict")
    if verdict not in (None, "win") and not args.force:
        # Only a holdout win is an improvement; shipping anything else is a decision to make explicitly.
        raise RegistryError(f"snapshot {args.ref} has holdout verdict {verdict!r}, which is not an improvement. "
                            "Fix: pass --force to promote it anyway")
    check_releasable(snapshot, rest)
    # the snapshot checked above, by its hash: a file swapped at the ref since it was read is not what ships
    registry.write_snapshot(snapshot)
    snapshot = registry.promote(snapshot.content_hash, slot=args.slot, by=args.by)
    print(f"promoted: {snapshot.described(args.slot)}; the next `evoharness compile` ships it")
    if second:
        print(f"warning: {second}", file=sys.stderr)
    return 0


def _rollback(argv: list[str]) -> int:
    parser = _parser("rollback", "Move a release slot back to the version promoted before the current one.")
    parser.add_argument("component", help="agent name, e.g. bfcl_agent")
    parser.add_argument("--class", dest="slot", default=DEFAULT_SLOT, help="release slot, e.g. fast (default: default)")
    parser.add_argument("--by", default="manual", help="who rolls back (recorded in the history)")
    args = parser.parse_args(argv)
    registry = _registry(args.registry)
    before = registry.promoted(args.component, args.slot)
    snapshot = registry.rollback(args.component, args.slot, by=args.by)
    was = f"  (was {before.content_hash[:12]})" if before else ""
    print(f"{snapshot.component}  {args.slot}  {snapshot.content_hash}{was}")
    return 0


def _metric(metrics: Mapping[str, Any], split: str, key: str) -> str:
    return fmt_metric((metrics.get(split) or {}).get(key), key, missing="-")


def versions_table(snapshots: Sequence[Snapshot], current: Mapping[tuple[str, str], str]) -> str:
    """One row per snapshot; ``current`` maps (component, slot) to the promoted hash."""
    header = ("hash", "component", "author", "created_at", "model", "dev_pass", "dev_cost", "promoted", "changes")
    rows = [header]
    for s in snapshots:
        slots = ",".join(sorted(slot for (comp, slot), h in current.items() if comp == s.component and h == s.content_hash))
        rows.append(
            (
                s.content_hash[:12],
                s.component,
                s.author,
                s.created_at,
                str((s.definition.get("model") or {}).get("route") or "-"),
                _metric(s.metrics, "dev", "pass_rate"),
                _metric(s.metrics, "dev", "cost_per_task"),
                f"* {slots}" if slots else "",
                _changes(s.provenance),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _changes(provenance: Mapping[str, Any]) -> str:
    """What a snapshot changed against its study's baseline, as the search described it."""
    role, changes = provenance.get("role"), provenance.get("changes")
    if changes:
        text = str(changes)
        return text if len(text) <= 80 else text[:79].rsplit(" ", 1)[0] + "…"
    return {"baseline": "baseline", "round_winner": f"round {provenance.get('round')} winner"}.get(str(role), "-")


def _versions(argv: list[str]) -> int:
    parser = _parser("versions", "List registry snapshots with their dev metrics and promoted slots.")
    parser.add_argument("component", nargs="?", help="only this agent")
    parser.add_argument("--show", metavar="HASH", help="print one snapshot (hash, prefix or path) as JSON")
    args = parser.parse_args(argv)
    registry = _registry(args.registry)
    if args.show:
        print(json.dumps(registry.load(args.show).to_dict(), indent=2, ensure_ascii=False))
        return 0
    snapshots, tampered = registry.scan(args.component)
    for path, why in tampered:  # reported, and left out: the rest still list
        print(f"tampered: {path}: {why}", file=sys.stderr)
    if not snapshots:
        print(f"no snapshots{f' of {args.component}' if args.component else ''} in {registry.root}")
        return 0
    current = {(c, s): h[-1].hash for c, slots in registry.promotions().items() for s, h in slots.items() if h}
    print(versions_table(snapshots, current))
    return 0


def promote_main(argv: Sequence[str] | None = None) -> int:
    return _run(_promote, argv)


def versions_main(argv: Sequence[str] | None = None) -> int:
    return _run(_versions, argv)


def rollback_main(argv: Sequence[str] | None = None) -> int:
    return _run(_rollback, argv)


# -- `evoharness snapshot [overrides]`: record the current (released + overridden) config ------------
def snapshot_validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> object:
    from evoharness.compiler.cli import compile_validate
    from evoharness.compiler.refusals import writable_dir

    variant = compile_validate(cfg, overrides)
    writable_dir("registry_dir", cfg.registry_dir)  # the snapshot is written there
    return variant


def snapshot_task(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from evoharness.compiler.release.merge import apply_promoted, promoted_for, snapshot_from_config

    overrides = list(HydraConfig.get().overrides.task)
    parent = promoted_for(cfg)
    snapshot = snapshot_from_config(
        apply_promoted(cfg, overrides),
        author="manual",
        parent_hash=parent.content_hash if parent else None,
        provenance={"overrides": overrides},
    )
    registry = Registry(str(cfg.registry_dir))
    registry.write_snapshot(snapshot)
    print(f"{snapshot.content_hash}  {registry.path_of(snapshot.content_hash)}")
