"""Hydra finds its sweepers and launchers by listing the folders of the ``hydra_plugins``
namespace. An editable install of this project serves its two (the NSGA-II sweeper and the
preloaded launcher) through an import hook, which that listing cannot see; this names their real
folder in the namespace so Hydra's listing finds them. An installed wheel keeps them in a real
folder already, and then nothing changes."""
from __future__ import annotations

import importlib.util
from pathlib import Path

OURS = ("hydra_plugins.evoharness_nsga2", "hydra_plugins.evoharness_parallel")


def expose_hydra_plugins() -> None:
    """Add the folder that holds this project's Hydra plugins to ``hydra_plugins.__path__``.

    Idempotent; call before Hydra first lists its plugins (its ``Plugins`` singleton)."""
    import hydra_plugins

    listed = {str(Path(p).resolve()) for p in hydra_plugins.__path__ if Path(p).is_dir()}
    for name in OURS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # not installed: Hydra then reports the missing sweeper or launcher itself
        folder = str(Path(spec.origin).resolve().parent.parent)
        if folder not in listed:
            hydra_plugins.__path__.append(folder)
            listed.add(folder)
