"""The names a plugin imports: workloads, tools, tool catalogs, mutators and model providers.

A plugin (a workload, a tool catalog, a mutator, a model provider, or a module registering several)
imports from here only; the modules behind these names may move, this one keeps them::

    from evoharness.plugin import EpisodeScore, Task, ToolSpec, register_workload

Each name is the project's own object, re-exported: its docstring (at its definition) gives its
parameters and what it raises. ``evoharness.testing`` holds the contract suites a plugin runs
against its own entries.
"""
from __future__ import annotations

from evoharness.compiler.callables import tool
from evoharness.compiler.catalog import register_tool_catalog
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.llm import litellm_module, register_model_provider
from evoharness.compiler.runtime.tool_outputs import ToolInfraError
from evoharness.compiler.runtime.trajectory import ToolCall, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import Environment, EpisodeScore, Failure, Task, Workload, register_workload
from evoharness.compiler.toolspec import ToolSpec
from evoharness.search.genome import PoolEntry
from evoharness.search.mutators.base import Control, FailedEpisode, MutationContext, Mutator, Proposal, ToolLoad, register_mutator

__all__ = [
    # workloads
    "Workload", "Task", "Environment", "EpisodeScore", "Failure", "ToolCall", "ToolCallRecord", "Trajectory",
    "register_workload", "ToolInfraError",
    # tools and tool catalogs
    "ToolSpec", "tool", "register_tool_catalog",
    # mutators
    "Mutator", "MutationContext", "FailedEpisode", "ToolLoad", "Proposal", "Control", "PoolEntry", "register_mutator",
    # model providers
    "register_model_provider", "litellm_module",
    # errors
    "ConfigError",
]
