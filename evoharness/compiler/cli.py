"""The compile command: config in, a content-hashed variant on disk, its hash printed."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

if TYPE_CHECKING:
    from evoharness.compiler.variant import HarnessVariant


def released(cfg: DictConfig, overrides: Sequence[str] | None = None) -> DictConfig:
    """The base config with the promoted snapshot merged in, command-line overrides on top."""
    from evoharness.compiler.release.merge import apply_promoted

    if overrides is None:
        from hydra.core.hydra_config import HydraConfig

        overrides = list(HydraConfig.get().overrides.task)
    return apply_promoted(cfg, overrides)


def compile_task(cfg: DictConfig) -> HarnessVariant:
    from hydra.core.hydra_config import HydraConfig

    from evoharness.compiler.atomic import print_whole
    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.release.merge import promoted_for
    from evoharness.compiler.writer import write_variant

    variant = compile_config(released(cfg))
    path = write_variant(variant, Path(cfg.runs_dir) / "compiled")
    write_variant(variant, HydraConfig.get().runtime.output_dir)
    print_whole(f"{variant.content_hash}  {path}")  # a sweep's jobs print beside each other
    snapshot = promoted_for(cfg)
    if snapshot is not None:  # which release this is: a user checks it against what promote said it shipped
        print_whole(f"release: {snapshot.described(str(cfg.release_slot))}, under this command's overrides", sys.stderr)
    return variant


def compile_validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> HarnessVariant:
    from evoharness.compiler.config_compile import compile_config
    from evoharness.compiler.errors import ConfigError

    if "trial" in cfg:  # the nsga2 sweeper's own per-job setting: on any other command it would bypass the seal check
        raise ConfigError("trial", "is the search's own per-job setting", "remove +trial=... from the command")
    compile_config(cfg)  # the overrides against the base config
    return compile_config(released(cfg, overrides))  # and the release itself (a tampered snapshot exits 2)


def main(argv: Sequence[str] | None = None) -> int:
    from evoharness.compiler.hydra_run import run_hydra

    return run_hydra("compile", list(sys.argv[1:] if argv is None else argv), compile_task, compile_validate)
