"""``hydra/launcher=preloaded_joblib``: Hydra's joblib launcher whose worker processes are forked
from a server that imported what every job needs once (litellm alone is seconds of CPU per
process), instead of each worker importing it again. The default launcher (conf/hydra/launcher/
parallel.yaml) is this one; the rest is evoharness.search.optimise.workers, imported lazily so that plugin
discovery stays cheap.

No `from __future__ import annotations` here: Hydra's plugin scan executes this module without
registering it in sys.modules, and string annotations would make the dataclass look it up."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.types import HydraContext, TaskFunction
from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from omegaconf import DictConfig


@dataclass
class PreloadedJoblibLauncherConf(JobLibLauncherConf):
    _target_: str = "hydra_plugins.evoharness_parallel.preloaded_launcher.PreloadedJoblibLauncher"
    # modules the fork server imports before it forks a worker: importable by a fresh interpreter
    # (installed, or on PYTHONPATH; not a path the search adds at run time). One that raises
    # ImportError is skipped, and the worker imports it itself; anything else it raises kills the server
    preload: list[str] = field(default_factory=lambda: ["evoharness.search.optimise.preload"])


ConfigStore.instance().store(group="hydra/launcher", name="preloaded_joblib", node=PreloadedJoblibLauncherConf,
                             provider="evoharness")


class PreloadedJoblibLauncher(JoblibLauncher):
    def __init__(self, preload: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)  # joblib.Parallel receives every other key
        self.preload = [str(m) for m in preload]

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from evoharness.search.optimise.workers import start_fork_server

        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        start_fork_server(self.preload, n_jobs=int(self.joblib.get("n_jobs", -1)))  # now: it imports while the search starts
