"""Evaluate, mutate, optimise, record: the search over harness variants, and the command line on top.

The package is also ``evoharness.search(...)``, the Python API's search: once anything imports this
package, Python binds the name ``search`` on ``evoharness`` to it, so the package itself must be
the function a user calls (see ``evoharness.api.search``)."""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the API sits above this package; named by string so no layer below imports it
        return importlib.import_module("evoharness.api").search(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
