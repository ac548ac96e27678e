"""`evoharness <command> [overrides]`. Config-driven commands are Hydra apps over conf/."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

USAGE = """usage: evoharness <command> [hydra overrides] [-m]

commands:
  compile     compile the agent config into a content-hashed variant under runs/compiled/
  evaluate    run the compiled agent on a workload split and report quality, cost and latency
  report      render runs/<study>/report.html from a search summary
  serve-sim   serve the simulated model over an OpenAI-compatible HTTP endpoint on loopback

examples:
  evoharness compile agent.tool_format=bash
  evoharness evaluate model=sim_small workload.split=dev
  evoharness evaluate -m model=sim_small,sim_medium,sim_large
"""

Task = Callable[[DictConfig], None]
Validate = Callable[[DictConfig], object]


def _hydra_commands() -> dict[str, tuple[Task, Validate]]:
    from compiler.cli import compile_task, compile_validate
    from search.commands import evaluate_task, evaluate_validate

    return {"compile": (compile_task, compile_validate), "evaluate": (evaluate_task, evaluate_validate)}


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "report":
        from search.report import report_main

        return report_main(rest)
    if command == "serve-sim":
        from compiler.sim.server import main as serve_main

        return int(serve_main(rest) or 0)
    commands = _hydra_commands()
    if command in commands:
        from compiler.hydra_app import run_hydra

        task, validate = commands[command]
        return run_hydra(command, rest, task, validate)
    print(f"error: unknown command {command!r}. Fix: use one of {sorted([*commands, 'report', 'serve-sim'])}", file=sys.stderr)
    return 2


def entry() -> None:
    sys.exit(main())
