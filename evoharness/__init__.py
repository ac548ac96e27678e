"""evoharness: a declarative config compiler and evolution engine for LLM tool-calling agents.

One import root: ``evoharness.compiler`` (config to harness variant, and everything that runs
one), ``evoharness.search`` (evaluate, mutate, optimise, record) and ``evoharness.conf`` (the
Hydra config groups). Plugins import :mod:`evoharness.plugin`; their tests import
:mod:`evoharness.testing`."""
from __future__ import annotations

__version__ = "0.1.0"
