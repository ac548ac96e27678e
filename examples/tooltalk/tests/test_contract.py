"""The ToolTalk plugin against evoharness's Workload contract: the workload this package
registers, built as ``workload=tooltalk`` builds it (both subsets)."""
from __future__ import annotations

from evoharness.testing import WorkloadContract


class TestToolTalk(WorkloadContract):
    workload_name = "tooltalk"
    workload_options = {"subsets": ["tooltalk", "easy"]}
    plugins = ("evoharness_tooltalk",)

