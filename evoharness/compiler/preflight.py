"""The preflight every Hydra command goes through: compose, then refuse bad input in one line.

Hydra reports composition errors as multi-line text with exit code 1 and only after it has
created the run directory. The preflight composes every combination of the overrides first
(expanding sweeps the way the basic sweeper does) and runs the command's own validation, so bad
input gets one line, exit code 2, and nothing is written.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from evoharness.compiler.atomic import unwritable
from evoharness.compiler.configpath import ConfigPath
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.hydra_argv import split_overrides
from evoharness.compiler.hydra_errors import UsageError, one_line_hydra_error, parse_error
from evoharness.compiler.refusals import check_hydra_dirs, refuse_no_ops, refuse_non_finite, refuse_secrets, writable_dir
from evoharness.compiler.schema import unknown_keys
from evoharness.compiler.secrets import remember_config

MAX_PREFLIGHT_COMBINATIONS = 64
VERSION_BASE = "1.3"  # Hydra's defaults for this version: no chdir into the run dir, _self_ last
WORKERS_PER_CORE = 2  # an evaluation waits on its model part of the time: two per core keep the cores busy


def usable_workers(at_most: object) -> int:
    """``${evoharness.workers:N}``: two workers per core this process may use, but no more than N (a
    launcher's workers beyond the largest batch would only hold memory, about 400 MB each). The
    worker counts tried on the main job are in bench/README.md."""
    import os

    try:
        cap = int(str(at_most))
    except ValueError:
        raise ConfigError("hydra.launcher.n_jobs", f"${{evoharness.workers:{at_most}}} needs a whole number",
                          "write ${evoharness.workers:6}, or a plain number of workers") from None
    return max(1, min(WORKERS_PER_CORE * len(os.sched_getaffinity(0)), cap))  # a batch size below 1 is the search's own error to report


OmegaConf.register_new_resolver("evoharness.workers", usable_workers, replace=True)

Validator = Callable[[DictConfig, Sequence[str]], object]  # (composed config, its overrides)


def _combinations(overrides: list[str], multirun: bool) -> list[list[str]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise UsageError(parse_error(overrides, first)) from None
    axes: list[list[str]] = []
    for ov in parsed:
        key = ov.get_key_element()
        if key.startswith("hydra") or key.startswith("+hydra"):
            continue
        if ov.is_sweep_override():
            if not multirun:
                raise UsageError(f"{ov.input_line}: a sweep needs multirun. Fix: add -m")
            try:
                values = list(ov.sweep_string_iterator())
            except Exception:  # interval()/range sweeps the search samples itself: check one value
                values = []
            axes.append([f"{key}={v}" for v in values])
        else:
            axes.append([str(ov.input_line)])
    combos = [list(c) for c in itertools.product(*[a for a in axes if a])]
    return combos[:MAX_PREFLIGHT_COMBINATIONS] or [[]]


def _compose(overrides: list[str], cp: ConfigPath, *, with_hydra: bool = False, keep: bool = False,
             for_run: bool = False) -> DictConfig:
    """The config composed on search path ``cp`` with ``overrides``, outside any run, exactly as
    ``hydra.main`` will (``--config-dir`` first, the searchpath entries after the package's conf/);
    a composition error is one UsageError line. With ``keep`` the composition stays initialized
    (the caller clears it), so validation can look further names up on the same search path.
    ``for_run`` composes what Hydra's own run would (its config and logging settings included), for
    ``run_composed`` to run without composing again."""
    from hydra import compose
    from hydra._internal.hydra import Hydra
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    searchpath = cp.searchpath_override()
    full = [*overrides, *([searchpath] if searchpath else [])]
    try:
        hydra = Hydra.create_main_hydra2(task_name="evoharness", config_search_path=cp.hydra_search_path())
        if for_run:
            return hydra.compose_config(config_name=cp.primary, overrides=full, run_mode=RunMode.RUN, with_log_configuration=True)
        return compose(config_name=cp.primary, overrides=full, return_hydra_config=with_hydra)
    except ConfigError:
        keep = False
        raise
    except Exception as exc:  # Hydra/OmegaConf composition and validation errors
        keep = False
        raise UsageError(one_line_hydra_error(exc, overrides, cp)) from None
    finally:
        if not keep:
            GlobalHydra.instance().clear()


def preflight(argv: Sequence[str], validate: Validator | None, cp: ConfigPath | None = None, *,
              for_run: bool = False) -> DictConfig | None:
    """Compose and validate every combination of ``argv``'s overrides. With ``for_run`` (a single
    run, no sweep) the one composition is Hydra's own run config, returned for ``run_composed``;
    Hydra is left initialized on it. Otherwise None."""
    from hydra.core.global_hydra import GlobalHydra

    cp = cp or ConfigPath()
    overrides, multirun = split_overrides(argv)
    refuse_secrets(overrides)
    refuse_no_ops(overrides)
    combos = _combinations(overrides, multirun)
    for_run = for_run and not multirun and len(combos) == 1
    run_cfg: DictConfig | None = None
    for combo in combos:
        # a run's composition carries Hydra's own config, so the command's overrides of hydra.* go in it
        cfg = _compose(overrides if for_run else combo, cp, keep=True, for_run=for_run)
        remember_config(cfg)
        try:
            if not str(cfg.get("runs_dir") or "").strip():
                raise ConfigError("runs_dir", "is empty: outputs would land in the working folder and Hydra's under /",
                                  "set runs_dir=runs (or any folder)")
            from evoharness.compiler.runtime.cache import is_url

            writable_dir("runs_dir", cfg.runs_dir)
            if cfg.get("registry_dir") and (unwritable(str(cfg.registry_dir)) or (None, ""))[1] == "file":
                writable_dir("registry_dir", cfg.registry_dir)  # every command reads its promoted slot: a file there is named here
            if cfg.get("cache_dir") and is_url(str(cfg.cache_dir)):
                from evoharness.compiler.runtime.redis_cache import check_location

                check_location(str(cfg.cache_dir))  # the server answers, before anything is paid for
            elif cfg.get("cache_dir"):
                writable_dir("cache_dir", cfg.cache_dir)
            refuse_non_finite(cfg)
            extra = unknown_keys(cfg)
            if extra:
                raise ConfigError(extra[0], "is not a setting of this config group, so nothing would read it",
                                  "check the spelling against the schema in compiler/schema.py, or drop the override")
            if validate is not None:
                validate(cfg, combo)
            if for_run:
                check_hydra_dirs(cfg, launcher=False)  # a single run launches nothing
                run_cfg = cfg
        except (ConfigError, UsageError):
            raise
        except Exception as exc:  # an interpolation that cannot resolve, a deleted group, a value of the wrong type
            raise UsageError(one_line_hydra_error(exc, combo, cp)) from None
        finally:
            if run_cfg is None:
                GlobalHydra.instance().clear()
    hydra_overrides = [o for o in overrides if o.lstrip("+~").startswith("hydra")]
    if hydra_overrides and run_cfg is None:
        _check_hydra_overrides(hydra_overrides, cp)
    return run_cfg


def _check_hydra_overrides(overrides: list[str], cp: ConfigPath) -> None:
    """Overrides of Hydra's own config (hydra.run.dir=..., hydra/launcher=...) composed once, so a
    typo or a missing plugin is a line here rather than Hydra's traceback after the run dir exists."""
    check_hydra_dirs(_compose(overrides, cp, with_hydra=True))
