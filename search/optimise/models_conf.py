"""Model configs by name (conf/model/<name>.yaml), validated against ModelConfig."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from compiler.errors import ConfigError
from compiler.names import checked_name
from compiler.schema import ModelConfig
from compiler.secrets import remember_config


def load_model_config(name: str, conf_dir: str | Path, *, path: str = "search.models") -> dict[str, Any]:
    checked_name(path, name, example="sim_small")
    file = Path(conf_dir) / "model" / f"{name}.yaml"
    if not file.exists():
        known = sorted(p.stem for p in file.parent.glob("*.yaml"))
        raise ConfigError(path, f"no model config named {name!r}", f"use one of {known} or add conf/model/{name}.yaml")
    try:
        raw = OmegaConf.load(file)
    except Exception as exc:  # YAML syntax: name the file and the line, not a parser traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(path, f"{file} is not valid YAML ({first})", f"fix the YAML in {file}") from None
    if not isinstance(raw, DictConfig):
        raise ConfigError(path, f"{file} does not hold a mapping of model settings", f"write key: value lines in {file}")
    raw.pop("defaults", None)
    remember_config(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(ModelConfig), raw)
        return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]
    except Exception as exc:  # a key the schema lacks, a value of the wrong type, an unset ${oc.env:...}
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(path, f"{file}: {first}", "correct it against ModelConfig in compiler/schema.py") from None
