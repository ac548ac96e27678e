"""From a composed Hydra config to a HarnessVariant (pure: no disk)."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from evoharness.compiler.variant import HarnessVariant, compile_agent


def to_plain(node: Any) -> Any:
    """A config node as plain dicts and lists, interpolations resolved; anything else as it is."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


def compile_config(cfg: DictConfig) -> HarnessVariant:
    return compile_agent(to_plain(cfg.agent), tool=to_plain(cfg.tool), model=to_plain(cfg.model))
