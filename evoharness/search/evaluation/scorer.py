"""The scorer's identity: a hash of the code that judges episodes, so a claim names what judged it.
Its own module, free of the statistics, because every evaluate and doctor record reads it."""
from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any


def scorer_hash(workload: Any) -> str:
    """sha256 of the scorer's source: the module that defines ``score`` and, when it is part of a
    package (a workload's scorer calls into its environment and scoring modules), every module of
    that package; then every module the workload names in ``scorer_modules`` (the benchmark code
    its scorer calls: a package counts with all its modules), so a change to how episodes are
    judged shows in the claim."""
    fn = type(workload).score
    module = inspect.getmodule(fn)
    if module is None:
        return hashlib.sha256(repr(fn).encode("utf-8")).hexdigest()
    package = module.__name__.rpartition(".")[0] if module.__spec__ and module.__spec__.parent else ""
    files = sorted(Path(module.__file__).parent.glob("*.py")) if package and module.__file__ else []
    try:
        sources = [f.read_text(encoding="utf-8") for f in files] if files else [inspect.getsource(module)]
    except (OSError, TypeError):
        sources = [repr(fn)]
    for name in getattr(workload, "scorer_modules", ()) or ():
        sources += [f"# {name}", *_module_sources(str(name))]
    settings = getattr(workload, "scorer_settings", None)  # what else decides a verdict (e.g. which text matcher ran)
    if settings:
        sources.append("# settings " + json.dumps(dict(settings), sort_keys=True, default=str))
    return hashlib.sha256("\n".join(sources).encode("utf-8")).hexdigest()


def _module_sources(name: str) -> list[str]:
    """The source of module ``name``; of every module under it when it is a package."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise ValueError(f"scorer module {name!r} cannot be found; a workload's scorer_modules name importable modules")
    origin = Path(spec.origin)
    files = sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]
    return [f"# {f.relative_to(origin.parent)}\n{f.read_text(encoding='utf-8')}" for f in files]
