"""`evoharness <command> [overrides]`. Config-driven commands are Hydra apps over conf/."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from evoharness.compiler.secrets import scrub

USAGE = """usage: evoharness <command> [hydra overrides] [-m]

commands:
  compile     compile the agent config into a content-hashed variant under runs/compiled/
  search      NSGA-II search over harness edits: Pareto front, dev selection, holdout claim
  evaluate    run the compiled agent on a workload split and report quality, cost and latency
  doctor      check the workload: gold replay passes, a do-nothing model's pass rate, determinism, final state scored
  snapshot    record the current config as a registry snapshot
  promote     promote a snapshot (hash, prefix or path) to a slot: --class fast
  versions    list snapshots of a component, --show HASH for one
  rollback    move a component's slot back to its previous promoted snapshot
  report      render runs/<study>/report.html from a search summary
  view        the transcripts of a study or of evaluations, side by side, as an HTML page
  cache       the response cache: path, stats, clear [--older-than DAYS] [--yes]
  serve-sim   serve the simulated model over an OpenAI-compatible HTTP endpoint on loopback (plugins=[m] for a plugin's tasks)

examples:
  evoharness compile agent.tool_format=bash
  evoharness evaluate model=sim_small workload.split=dev
  evoharness evaluate -m model=sim_small,sim_medium,sim_large
"""

Task = Callable[[DictConfig], object]
Validate = Callable[[DictConfig, Sequence[str]], object]


def hydra_commands() -> dict[str, tuple[Task, Validate]]:
    """The config-driven commands: name -> (Hydra task, preflight validation)."""
    from evoharness.compiler.cli import compile_task, compile_validate
    from evoharness.search.cli.commands import doctor_task, doctor_validate, evaluate_task, evaluate_validate, search_task, search_validate
    from evoharness.search.cli.registry import snapshot_task, snapshot_validate

    return {
        "compile": (compile_task, compile_validate),
        "evaluate": (evaluate_task, evaluate_validate),
        "doctor": (doctor_task, doctor_validate),
        "search": (search_task, search_validate),
        "snapshot": (snapshot_task, snapshot_validate),
    }


SWEEPABLE = {"model": "search.models", "agent.tool_format": "search.formats", "model.temperature": "search.temperatures"}


def search_space_overrides(args: Sequence[str]) -> list[str]:
    """In a search, `model=a,b`, `agent.tool_format=json,bash` and `model.temperature=0,0.7` name the
    choices the search may take (as with Hydra's Optuna sweeper) rather than a grid to run."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from evoharness.compiler.hydra_errors import UsageError

    out: list[str] = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            out.append(arg)
            continue
        try:
            parsed = OverridesParser.create().parse_overrides([arg])[0]
        except Exception:  # the preflight names what cannot be parsed, and how to quote it
            out.append(arg)
            continue
        if not parsed.is_sweep_override():
            out.append(arg)
            continue
        key = parsed.get_key_element()
        if key not in SWEEPABLE:
            raise UsageError(f"{arg}: a search cannot sweep {key!r}. "
                             f"Fix: sweep one of {sorted(SWEEPABLE)}, or use `evoharness evaluate -m` for a grid")
        values = list(parsed.sweep_string_iterator())
        out.append(f"{SWEEPABLE[key]}=[{','.join(values)}]")
    return out


def command_argv(command: str, args: Sequence[str]) -> list[str]:
    """The Hydra argv of ``evoharness <command> <args>``: a search is always a multirun under the
    nsga2 sweeper, its sweeps naming the search space; an evaluate sweep ends with one table across
    its jobs. A sweep a search cannot take is a UsageError."""
    rest = list(args)
    if command == "search":
        rest = search_space_overrides(rest)
        if not any(a in ("-m", "--multirun") for a in rest):
            rest = ["-m", *rest]
        if not any(a.startswith("hydra/sweeper=") for a in rest):
            rest = [*rest, "hydra/sweeper=nsga2"]
    if command == "evaluate" and any(a in ("-m", "--multirun") for a in rest):
        # the table comes from Hydra's multirun-end callback
        rest = [*rest, "+hydra.callbacks.sweep_summary._target_=evoharness.search.records.sweep.SweepSummary"]
    return rest


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "report":
        from evoharness.search.cli.report import report_main

        return report_main(rest)
    if command == "cache":
        from evoharness.search.cli.cache_cmd import cache_main

        return cache_main(rest)
    if command == "view":
        from evoharness.search.cli.view import view_main

        return view_main(rest)
    if command == "serve-sim":
        from evoharness.compiler.errors import ConfigError
        from evoharness.compiler.hydra_argv import load_argv_plugins
        from evoharness.compiler.hydra_errors import UsageError
        from evoharness.compiler.sim.server import main as serve_main

        try:  # a plugin's workloads must be registered before the simulator looks a task up
            rest = load_argv_plugins(rest)
        except (ConfigError, UsageError) as exc:
            print(f"error: {scrub(str(exc))}", file=sys.stderr)
            return 2
        return int(serve_main(rest) or 0)
    if command in ("promote", "versions", "rollback"):
        from evoharness.search.cli import registry

        return int(getattr(registry, f"{command}_main")(rest))
    if any(a in ("-h", "--help") for a in rest):  # before Hydra composes anything: a help is instant
        from evoharness.search.cli.help import command_help

        text = command_help(command)
        if text is not None:
            print(text)
            return 0
    commands = hydra_commands()
    if command in commands:
        from evoharness.compiler.hydra_errors import UsageError
        from evoharness.compiler.hydra_run import run_hydra
        from evoharness.search.cli.commands import sharing_workloads

        task, validate = commands[command]
        try:
            rest = command_argv(command, rest)
        except UsageError as exc:
            print(f"error: {scrub(str(exc))}", file=sys.stderr)
            return 2
        with sharing_workloads():
            return run_hydra(command, rest, task, validate)
    others = ["promote", "versions", "rollback", "report", "view", "cache", "serve-sim"]
    print(f"error: unknown command {command!r}. Fix: use one of {sorted([*commands, *others])}", file=sys.stderr)
    return 2


def entry() -> None:
    sys.exit(main())
