"""The compile command: config in, a content-hashed variant on disk, its hash printed."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig


def compile_task(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from compiler.config_compile import compile_config
    from compiler.writer import write_variant

    variant = compile_config(cfg)
    path = write_variant(variant, Path(cfg.runs_dir) / "compiled")
    write_variant(variant, HydraConfig.get().runtime.output_dir)
    print(f"{variant.content_hash}  {path}")


def compile_validate(cfg: DictConfig) -> object:
    from compiler.config_compile import compile_config

    return compile_config(cfg)


def main(argv: Sequence[str] | None = None) -> int:
    from compiler.hydra_app import run_hydra

    return run_hydra("compile", list(sys.argv[1:] if argv is None else argv), compile_task, compile_validate)
