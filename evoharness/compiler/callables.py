"""Tools as plain Python functions, named by import path (``my_pkg.tools.search_flights``).

The JSON schema comes from the signature, built with pydantic. The descriptions come from the
docstring, read by docstring-parser (Google, NumPy, reST or Epydoc style). A parameter named
``state`` is not the model's: the environment passes its state mapping there. ``@tool`` labels a
function with ``mutates_state`` and ``group``; an unlabelled function is a read-only tool of no
group. A tool call is dispatched to the function by name, never by evaluating text.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.toolspec import ToolSpec

F = TypeVar("F", bound=Callable[..., Any])
STATE_PARAMETER = "state"

# A tool runs with arguments the model chose. Functions of these modules run commands, load code,
# open connections or touch the interpreter, so the model would steer them: they are refused by the
# import path and by the module the function was defined in (a re-export under another name too).
# All of os is refused, os.path with it (its functions live in posixpath, ntpath and genericpath):
# exists, getsize, realpath and expanduser tell the model about the machine's files, and a tool that
# needs a path is a few lines in the user's own module.
# Beyond these, the whole standard library is refused: no function of it was written as an agent's
# tool, and too many run code or reach the network (timeit, pydoc.pipepager, cProfile.run,
# urllib.request, shelve, venv) for a list to keep up. So are third-party modules that load code,
# render unsandboxed templates or call out on their own.
DENIED_MODULES = (
    "os", "posix", "nt", "posixpath", "ntpath", "genericpath", "subprocess", "shutil", "builtins", "pty", "sys",
    "importlib", "runpy", "pickle", "marshal", "ctypes", "socket", "multiprocessing", "code", "codeop", "pdb",
    "webbrowser", "asyncio.subprocess",
    "yaml", "dill", "cloudpickle", "joblib", "jinja2", "hydra", "omegaconf", "litellm", "requests", "httpx", "aiohttp",
    "urllib3", "ray", "submitit", "IPython", "numpy", "scipy", "pydantic", "docstring_parser",
)


def tool(*, mutates_state: bool = False, group: str = "", name: str | None = None, live: bool = False) -> Callable[[F], F]:
    """Label a tool function: whether a call can change the environment, its API group, its name,
    and whether its output is live (a service, the clock): live tools are what tool-output
    snapshots record and replay (compiler/runtime/tool_outputs.py).

    Args:
        mutates_state: A call can change the environment (default: a read-only tool).
        group: The tool's API group (default: none).
        name: The name the model calls it by (default: the function's name).
        live: Its output comes from outside the process, so snapshots record and replay it.

    Raises:
        Never raises here. The function is checked when a config names it: no docstring, ``*args``,
        or an annotation with no JSON schema is a ConfigError naming the function.
    """
    def label(fn: F) -> F:
        fn.__evoharness_tool__ = {"mutates_state": bool(mutates_state), "group": str(group), "name": name,  # type: ignore[attr-defined]
                                  "live": bool(live)}
        return fn
    return label


def is_live(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, "__evoharness_tool__", {}).get("live", False))


def _denied(module: str) -> str | None:
    listed = next((d for d in DENIED_MODULES if module == d or module.startswith(d + ".")), None)
    if listed:
        return listed
    top = module.partition(".")[0]
    return f"standard-library ({top})" if top in sys.stdlib_module_names or top.lstrip("_") in sys.stdlib_module_names else None


def _refuse_denied(path: str, target: str, module: str) -> None:
    denied = _denied(module)
    if denied:
        raise ConfigError(path, f"{target!r} is a function of {module!r}; a model's arguments must not steer {denied} functions",
                          "write a tool function in your own module that does only what the agent needs")


def import_target(path: str, target: str) -> Callable[..., Any]:
    """``pkg.module.function`` or ``pkg.module:function``, imported; a bad path is a ConfigError at ``path``."""
    module, sep, attr = target.partition(":") if ":" in target else target.rpartition(".")
    if not module or not attr or any(c in target for c in "/\\ ()"):
        raise ConfigError(path, f"{target!r} is not an import path of a function", "write package.module.function")
    _refuse_denied(path, target, module)
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(path, f"cannot import {target!r} ({type(exc).__name__}: {exc})",
                          "check the module and function names, and that the package is installed") from None
    if not inspect.isfunction(obj):  # a class, a builtin (os.system) or a callable object is not a tool function
        raise ConfigError(path, f"{target!r} is not a Python function", "name a function defined with def in your own module")
    _refuse_denied(path, target, str(getattr(obj, "__module__", None) or ""))
    return obj  # type: ignore[no-any-return]


def _strip_titles(node: Any) -> Any:
    """pydantic's schema carries a ``title`` per property: noise to a model, so it goes."""
    if isinstance(node, Mapping):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def spec_of(fn: Callable[..., Any], *, path: str = "tool.callables") -> ToolSpec:
    """The ToolSpec a model sees for ``fn``: name, docstring description, parameters schema, labels."""
    import docstring_parser
    import pydantic

    labels = getattr(fn, "__evoharness_tool__", {})
    name = labels.get("name") or fn.__name__
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    described = {p.arg_name: (p.description or "").strip() for p in doc.params}
    fields: dict[str, Any] = {}
    try:  # string annotations (a module with `from __future__ import annotations`) resolved in the function's module
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigError(path, f"{name}: cannot resolve its annotations ({type(exc).__name__}: {exc})",
                          "import every type its annotations name in the tool's module") from None
    for pname, p in inspect.signature(fn).parameters.items():
        if pname == STATE_PARAMETER:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise ConfigError(path, f"{name}: parameter {pname!r} is {p.kind.description}; a model passes keyword arguments",
                              "give the function named parameters only")
        annotation = hints.get(pname, Any)
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[pname] = (annotation, pydantic.Field(default, description=described.get(pname) or None))
    try:
        model = pydantic.create_model(f"{name}_arguments", **fields)
        schema = _strip_titles(model.model_json_schema())
    except Exception as exc:  # an annotation pydantic cannot express as JSON schema
        raise ConfigError(path, f"{name}: no JSON schema for its parameters ({type(exc).__name__}: {str(exc).splitlines()[0]})",
                          "annotate parameters with JSON types (str, int, float, bool, list[...], dict[str, ...], Literal[...])") from None
    schema.setdefault("properties", {})
    description = " ".join(x for x in (doc.short_description, doc.long_description) if x).strip()
    if not description:
        raise ConfigError(path, f"{name}: the function has no docstring, so the model would not know what it does",
                          "write a docstring: one line on what it does, and an Args: section for its parameters")
    return ToolSpec(name=name, description=description, parameters=schema, mutates_state=bool(labels.get("mutates_state", False)),
                    group=str(labels.get("group", "")))


@lru_cache(maxsize=64)
def _specs(targets: tuple[str, ...]) -> tuple[tuple[ToolSpec, Callable[..., Any]], ...]:
    out = []
    for i, target in enumerate(targets):
        fn = import_target(f"tool.callables[{i}]", target)
        out.append((spec_of(fn, path=f"tool.callables[{i}]"), fn))
    names = [s.name for s, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError("tool.callables", f"two functions are named {dup[0]!r}", "rename one, or label it with @tool(name=...)")
    return tuple(out)


def callable_tools(targets: Sequence[str]) -> dict[str, tuple[ToolSpec, Callable[..., Any]]]:
    """Spec and function per tool name, in the order given."""
    return {s.name: (s, fn) for s, fn in _specs(tuple(str(t) for t in targets))}


@lru_cache(maxsize=256)
def _takes_state(fn: Callable[..., Any]) -> bool:
    return STATE_PARAMETER in inspect.signature(fn).parameters  # read once per function, not on every call


def call(fn: Callable[..., Any], arguments: Mapping[str, Any], state: dict[str, Any]) -> Any:
    """Run the tool with the model's keyword arguments, and the state where it asks for it."""
    return fn(**dict(arguments), **({STATE_PARAMETER: state} if _takes_state(fn) else {}))
