"""evoharness: a declarative config compiler and evolution engine for LLM tool-calling agents.

One import root: ``evoharness.compiler`` (config to harness variant, and everything that runs
one), ``evoharness.search`` (evaluate, mutate, optimise, record) and ``evoharness.conf`` (the
Hydra config groups). Plugins import :mod:`evoharness.plugin`; their tests import
:mod:`evoharness.testing`."""
from __future__ import annotations

__version__ = "0.1.0"

_API = {"compile", "evaluate", "evaluate_async", "search"}
_ERRORS = {"ConfigError": "evoharness.compiler.errors", "RunFailed": "evoharness.compiler.errors",
           "UsageError": "evoharness.compiler.hydra_errors", "SearchOutcome": "evoharness.search.records.outcome"}
__all__ = ["compile", "evaluate", "evaluate_async", "search", "ConfigError", "RunFailed", "UsageError", "SearchOutcome",
           "__version__"]


def __getattr__(name: str) -> object:
    # loaded on first use: a plugin importing evoharness.plugin does not pay for Hydra and the search
    import importlib

    if name == "search":
        # the package, which is callable as the API's search: a dotted path through it
        # (evoharness.search.records...) resolves whether or not it was imported before
        return importlib.import_module("evoharness.search")
    if name in _API:
        return getattr(importlib.import_module("evoharness.api"), name)
    if name in _ERRORS:
        return getattr(importlib.import_module(_ERRORS[name]), name)
    raise AttributeError(f"module 'evoharness' has no attribute {name!r}")
