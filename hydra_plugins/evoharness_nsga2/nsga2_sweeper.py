"""Hydra only discovers sweepers under ``hydra_plugins``: this shim registers ``hydra/sweeper=nsga2``
and delegates to evoharness.search.optimise.sweeper, imported lazily so that plugin discovery stays cheap.

No `from __future__ import annotations` here: Hydra's plugin scan executes this module without
registering it in sys.modules, and string annotations would make the dataclass look it up."""

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class NSGA2SweeperConf:
    _target_: str = "hydra_plugins.evoharness_nsga2.nsga2_sweeper.NSGA2Sweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="nsga2", node=NSGA2SweeperConf, provider="evoharness")


class NSGA2Sweeper(Sweeper):
    """Search settings come from the ``search`` config group, not from the sweeper node."""

    def __init__(self) -> None:
        from evoharness.search.optimise.sweeper import NSGA2SweeperImpl

        self._impl = NSGA2SweeperImpl()

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self._impl.sweep(arguments)
