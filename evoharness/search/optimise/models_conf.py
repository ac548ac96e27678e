"""Model configs by name (``model/<name>.yaml`` on the config search path), validated against
ModelConfig. Composed by Hydra, so a model file that works as ``model=<name>`` (defaults list,
interpolations) works in ``search.models`` and ``search.teacher`` too."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.configpath import compose_option, current_dirs, group_files
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import checked_name
from evoharness.compiler.schema import ModelConfig
from evoharness.compiler.secrets import find_secret, remember_config


def load_model_config(name: str, dirs: Sequence[str | Path] | None = None, *, path: str = "search.models") -> dict[str, Any]:
    """``name``'s model config from ``dirs`` (first wins), or from the running command's search path."""
    checked_name(path, name, example="sim_small")
    folders = [Path(d) for d in dirs] if dirs is not None else current_dirs()
    files = group_files("model", folders)
    if name not in files:
        raise ConfigError(path, f"no model config named {name!r} in {', '.join(str(d / 'model') for d in folders)}",
                          f"use one of {sorted(files)} or add model/{name}.yaml to one of those folders")
    file = files[name]
    try:
        raw = compose_option("model", name, folders if dirs is not None else None)
    except Exception as exc:  # YAML syntax, a list where a mapping belongs, a missing default: one line naming the file
        raise ConfigError(path, _why(exc, file), f"fix {file}") from None
    if not isinstance(raw, DictConfig):
        raise ConfigError(path, f"{file} does not hold a mapping of model settings", f"write key: value lines in {file}")
    remember_config(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(ModelConfig), raw)
        plain: dict[str, Any] = OmegaConf.to_container(merged, resolve=True)  # type: ignore[assignment]
    except Exception as exc:  # a key the schema lacks, a value of the wrong type, an unset ${oc.env:...}
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(path, f"{file}: {first}", "correct it against ModelConfig in compiler/schema.py") from None
    # the same refusal model=<name> gets: a literal key would travel in every job spec and record
    leaked = find_secret({"model": plain})
    if leaked:
        raise ConfigError(f"{path}: {file} {leaked}", "looks like a credential; it would be written into every job and record",
                          "put the NAME of an environment variable in api_key_env instead")
    return plain


def _why(exc: BaseException, file: Path) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    mark = getattr(cause, "problem_mark", None)
    if mark is not None:
        return f"{file} is not valid YAML (line {mark.line + 1}: {getattr(cause, 'problem', '') or 'syntax error'})"
    lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
    if lines and "got ListConfig" in lines[0]:
        return f"{file} does not hold a mapping of model settings (write key: value lines)"
    return f"{file}: {lines[0] if lines else type(cause).__name__}"
