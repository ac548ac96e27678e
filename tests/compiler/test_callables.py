"""Python functions as tools: the schema from the signature (pydantic), the descriptions from the
docstring (docstring-parser), the state parameter hidden from the model, bad functions refused."""
from __future__ import annotations

from subprocess import getoutput as shell_out  # noqa: F401  (a re-export under another name, refused by where it is defined)
from typing import Any, Literal

import pytest

from evoharness.compiler.callables import call, spec_of, tool
from evoharness.compiler.errors import ConfigError


@tool(mutates_state=True, group="orders")
def refund(order_id: str, amount: float, reason: Literal["damaged", "late"], note: str = "", *, state: dict[str, Any]) -> str:
    """Refund an order.

    Longer words about refunds.

    Args:
        order_id: The order's id.
        amount: How much to refund.
        reason: Why.
    """
    state.setdefault("refunds", []).append((order_id, amount))
    return "ok"


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    spec = spec_of(refund)
    assert spec.name == "refund" and spec.description == "Refund an order. Longer words about refunds."
    props = spec.parameters["properties"]
    assert list(props) == ["order_id", "amount", "reason", "note"] and "state" not in props  # the model never sees the state
    assert props["amount"]["type"] == "number" and props["reason"]["enum"] == ["damaged", "late"]
    assert props["order_id"]["description"] == "The order's id." and "description" not in props["note"]
    assert spec.parameters["required"] == ["order_id", "amount", "reason"] and props["note"]["default"] == ""
    assert spec.mutates_state and spec.group == "orders" and not any("title" in p for p in props.values())


def test_a_call_passes_the_state_where_the_function_asks_for_it() -> None:
    state: dict[str, Any] = {}
    assert call(refund, {"order_id": "A-1", "amount": 2.5, "reason": "late"}, state) == "ok"
    assert state == {"refunds": [("A-1", 2.5)]}


def no_doc(x: int) -> int:
    return x


def star(*args: int) -> int:
    """Adds numbers."""
    return sum(args)


@pytest.mark.parametrize("fn, expected", [(no_doc, "has no docstring"), (star, "a model passes keyword arguments")])
def test_functions_a_model_cannot_call_well_are_one_error(fn: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        spec_of(fn, path="tool.callables[0]")


def test_catalog_reads_callables_and_names_a_bad_import_path() -> None:
    from evoharness.compiler.catalog import build_catalog

    catalog = build_catalog({"callables": ["tests.compiler.test_callables.refund"]})
    assert list(catalog) == ["refund"] and catalog["refund"].mutates_state
    for bad, why in [("tests.compiler.nope.refund", "cannot import"), ("os.system(1)", "is not an import path"),
                     ("tests.compiler.test_callables.missing", "cannot import"),
                     ("tests.compiler.test_callables.Refunds", "is not a Python function"),
                     ("tests.compiler.test_callables.refund_object", "is not a Python function")]:
        with pytest.raises(ConfigError, match=why):
            build_catalog({"callables": [bad]})


# Functions that would let a model's arguments run commands, load code or reach the machine: refused
# by import path, and by the module the function is defined in (a re-export, an attribute walk).
REFUSED = [
    "subprocess.getoutput", "subprocess:getoutput", "subprocess.check_output", "os.popen", "os.system", "os.path.join",
    "os.path.exists", "posixpath.exists", "shutil.rmtree", "pty.spawn", "importlib.import_module", "runpy.run_path",
    "pickle.load", "code.interact", "codeop.compile_command", "pdb.run", "webbrowser.open", "ctypes.string_at",
    "socket.create_connection", "multiprocessing.Pipe", "asyncio.create_subprocess_shell", "asyncio.subprocess.create_subprocess_exec",
    "glob:os.popen", "glob:os.path.exists", "tests.compiler.test_callables.shell_out",
    # the rest of the standard library, and third-party modules that load code or call out
    "timeit.timeit", "pydoc.pipepager", "cProfile.run", "profile.run", "doctest.run_docstring_examples", "urllib.request.urlopen",
    "codecs.open", "glob.glob", "shelve.open", "venv.create", "ensurepip.bootstrap", "http.server.test", "pathlib:Path.write_text",
    "json.dumps", "yaml.unsafe_load", "jinja2.Template.render", "hydra.utils.instantiate",
]


@pytest.mark.parametrize("target", REFUSED)
def test_functions_that_reach_the_system_are_refused(target: str) -> None:
    from evoharness.compiler.catalog import build_catalog

    with pytest.raises(ConfigError) as err:
        build_catalog({"callables": ["tests.compiler.test_callables.refund", target]})
    message = str(err.value)
    assert message.startswith(f"tool.callables[1]: {target!r} is a function of ") and "\n" not in message, message
    assert message.endswith("Fix: write a tool function in your own module that does only what the agent needs"), message


def test_the_refusal_names_the_module_the_function_comes_from() -> None:
    from evoharness.compiler.callables import import_target

    with pytest.raises(ConfigError, match=r"is a function of 'asyncio'.*standard-library \(asyncio\)"):  # refused before import
        import_target("tool.callables[0]", "asyncio.create_subprocess_shell")
    with pytest.raises(ConfigError, match="is a function of 'subprocess'"):  # renamed in this module
        import_target("tool.callables[0]", "tests.compiler.test_callables.shell_out")


@pytest.mark.parametrize("target", ["tests.compiler.test_callables.refund", "networkx.utils.misc.flatten"])
def test_other_functions_still_import(target: str) -> None:
    # a user's own function, and a package's that neither loads code nor calls out
    from evoharness.compiler.callables import import_target

    fn = import_target("tool.callables[0]", target)
    assert callable(fn) and fn.__name__ == target.rpartition(".")[2]


class Refunds:  # a class is not a tool function
    pass


refund_object = Refunds()  # nor is an instance
