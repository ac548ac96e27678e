"""The order desk against evoharness's Workload contract: the built-in ``tasks`` workload on this
package's tasks file and tool functions, with the options conf/workload/refunds.yaml gives it."""
from __future__ import annotations

from omegaconf import OmegaConf
from refunds_shop import CONFIG_DIR, TASKS

from evoharness.testing import WorkloadContract

TOOLS = list(OmegaConf.load(CONFIG_DIR / "tool" / "refunds.yaml").callables)


class TestOrderDesk(WorkloadContract):
    workload_name = "tasks"
    workload_options = {"path": str(TASKS), "tools": TOOLS}
    plugins = ("refunds_shop",)


def test_the_suite_checks_every_tool_function() -> None:
    # the contract's tool checks see the tools the config lists, and the config lists every one
    from refunds_shop import tools

    defined = {name for name, fn in vars(tools).items() if getattr(fn, "__module__", None) == tools.__name__ and callable(fn)}
    assert {t.rsplit(".", 1)[1] for t in TOOLS} == defined
