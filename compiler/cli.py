"""`evoharness <command> [overrides]`: each config-driven command is a Hydra app over conf/."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from omegaconf import DictConfig

USAGE = """usage: evoharness <command> [hydra overrides] [-m]

commands:
  compile     compile the agent config into a content-hashed variant under runs/compiled/
"""


def _compile_task(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from compiler.config_compile import compile_config
    from compiler.writer import write_variant

    variant = compile_config(cfg)
    path = write_variant(variant, Path(cfg.runs_dir) / "compiled")
    write_variant(variant, HydraConfig.get().runtime.output_dir)
    print(f"{variant.content_hash}  {path}")


def _compile_validate(cfg: DictConfig) -> object:
    from compiler.config_compile import compile_config

    return compile_config(cfg)


HYDRA_COMMANDS: dict[str, tuple[Callable[[DictConfig], None], Callable[[DictConfig], object]]] = {
    "compile": (_compile_task, _compile_validate),
}


def main(argv: Sequence[str] | None = None, *, prog_command: str | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = list(sys.argv[1:] if argv is None else argv)
    if prog_command is not None:
        args = [prog_command, *args]
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command in HYDRA_COMMANDS:
        from compiler.hydra_app import run_hydra

        task, validate = HYDRA_COMMANDS[command]
        return run_hydra(command, rest, task, validate)
    print(f"error: unknown command {command!r}. Fix: use one of {sorted(HYDRA_COMMANDS)}", file=sys.stderr)
    return 2


def entry() -> None:
    sys.exit(main())
