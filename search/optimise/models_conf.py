"""Model configs by name (conf/model/<name>.yaml), validated against ModelConfig."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from compiler.errors import ConfigError
from compiler.schema import ModelConfig


def load_model_config(name: str, conf_dir: str | Path, *, path: str = "search.models") -> dict[str, Any]:
    file = Path(conf_dir) / "model" / f"{name}.yaml"
    if not file.exists():
        known = sorted(p.stem for p in file.parent.glob("*.yaml"))
        raise ConfigError(path, f"no model config named {name!r}", f"use one of {known} or add conf/model/{name}.yaml")
    raw = OmegaConf.load(file)
    assert isinstance(raw, DictConfig), f"{file} must hold a mapping"
    raw.pop("defaults", None)
    merged = OmegaConf.merge(OmegaConf.structured(ModelConfig), raw)
    return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]
