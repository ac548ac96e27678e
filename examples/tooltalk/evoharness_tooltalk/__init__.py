"""ToolTalk as an evoharness workload, installed as a plugin (entry point ``evoharness.plugins``).

Importing it registers the ``tooltalk`` workload and tool catalog; ``CONFIG_DIR`` brings
``workload=tooltalk``, ``agent=tooltalk_agent`` and ``tool=tooltalk``.
"""
from pathlib import Path

from evoharness_tooltalk.workload import ToolTalkWorkload, tooltalk_tool_specs  # noqa: F401  (registers both)

CONFIG_DIR = Path(__file__).parent / "conf"
