"""What the preflight refuses in a composed config or its overrides before anything runs: a value
that is not finite, a credential on the command line, an override that changes nothing, a folder
that cannot be written, a launcher's worker count out of range."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from evoharness.compiler.atomic import unwritable
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.hydra_errors import UsageError


def refuse_non_finite(cfg: DictConfig) -> None:
    """No setting is NaN or infinite, whichever file or override it comes from: NaN passes every "< 0"
    check, and a record holding one cannot be written as JSON once the run has been paid for. A value
    that cannot be resolved here (a variable only the machine that reads it has) is left to whoever reads it."""
    import math

    def walk(node: Any, path: str) -> None:
        keys: list[Any] = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else (
            list(range(len(node))) if isinstance(node, ListConfig) else [])
        for key in keys:
            if not path and key == "hydra":  # Hydra's own node resolves only inside a run
                continue
            where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
            try:
                value = node[key]
            except Exception:  # an interpolation this command never resolves: not this check's to report
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(where, f"{value} is not a finite number", "give a finite number (or null where the setting allows it)")
            walk(value, where)

    walk(cfg, "")


def refuse_secrets(overrides: Sequence[str]) -> None:
    """A credential on the command line would be copied into Hydra's run files and our records."""
    from evoharness.compiler.secrets import find_secret

    for ov in overrides:
        key, _, value = ov.partition("=")
        name = key.lstrip("+~")
        if find_secret({name: value}):
            # a model key has one place (api_key_env); a database URL has none, so it comes whole from the environment
            fix = (f"export the URL in an environment variable and pass {name}='${{oc.env:YOUR_VAR}}' (the password is masked "
                   "in every record)" if name.endswith("storage") else
                   "keys are read only from the environment: export it and put the variable's NAME in model.api_key_env")
            raise UsageError(f"{name}: the value looks like a credential and would be written into the run's records. Fix: {fix}")


def refuse_no_ops(overrides: Sequence[str]) -> None:
    """``key={}`` merges nothing into an existing mapping (Hydra merges dict overrides): the user
    meant to clear it, and would get the old mapping without a word."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException:
        return  # _combinations reports it
    for ov in parsed:
        if not ov.is_delete() and not ov.is_sweep_override() and ov.value() == {}:
            key = ov.get_key_element()
            raise UsageError(f"{key}={{}}: a mapping override merges into the existing one, so an empty mapping changes nothing. "
                             f"Fix: remove entries with ~{key.lstrip('+')}.<name>, or set the ones you want")


def writable_dir(key: str, value: object) -> None:
    """``value`` is, or can be created as, a directory this process may write (checked without creating it)."""
    trouble = unwritable(str(value))
    if trouble is None:
        return
    probe, why = trouble
    if why == "file":
        raise ConfigError(key, f"{value!r} is under {probe}, which is a file, not a folder", f"point {key} at a folder")
    raise ConfigError(key, f"{value!r} cannot be written ({probe}: {why})",
                      f"point {key} at a folder you can write, e.g. {key}={'runs/cache' if key == 'cache_dir' else 'runs'}")


def check_hydra_dirs(cfg: DictConfig, *, launcher: bool = True) -> None:
    if launcher:
        _check_workers(cfg)
    for key in ("run.dir", "sweep.dir"):
        value = OmegaConf.select(cfg.hydra, key, throw_on_resolution_failure=False)
        if isinstance(value, str) and "${" not in value:
            writable_dir(f"hydra.{key}", value)


def _check_workers(cfg: DictConfig) -> None:
    """A launcher's worker count, resolved (``${evoharness.workers:...}``) and in range, before the sweep dir exists."""
    try:
        n_jobs = OmegaConf.select(cfg.hydra, "launcher.n_jobs")
    except Exception as exc:
        inner: BaseException | None = exc
        while inner is not None and not isinstance(inner, ConfigError):  # OmegaConf wraps what a resolver raises
            inner = inner.__cause__ or inner.__context__
        if inner is not None:
            raise inner from None
        raise UsageError(f"hydra.launcher.n_jobs: {str(exc).splitlines()[0]}. Fix: give a number of workers") from None
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ConfigError("hydra.launcher.n_jobs", f"{n_jobs!r} is not a number of workers",
                          "give a positive count, or -1 for one per core")
