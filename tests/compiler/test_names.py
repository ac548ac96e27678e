from __future__ import annotations

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.names import checked_name, is_name
from evoharness.compiler.variant import compile_agent
from tests.compiler.fixtures import configs


@pytest.mark.parametrize(
    "value, ok",
    [("bfcl_sim", True), ("a", True), ("v1.2-x_y", True), ("9lives", True), ("", False), (".", False), ("..", False),
     ("../x", False), ("a/b", False), ("/abs", False), (".hidden", False), ("-flag", False), ("a b", False), ("a\\b", False),
     ("ünï", False), (None, False), (3, False)],
)
def test_plain_names(value: object, ok: bool) -> None:
    assert is_name(value) is ok
    if not ok:
        with pytest.raises(ConfigError, match="is not a plain name"):
            checked_name("x.name", value, example="n")


@pytest.mark.parametrize("name", ["../../etc", "", "a/b"])
def test_an_agent_whose_name_is_a_path_does_not_compile(name: str) -> None:
    agent, tool, model = configs()
    with pytest.raises(ConfigError) as err:
        compile_agent({**agent, "name": name}, tool=tool, model=model)
    assert str(err.value).startswith(f"agent.name: {name!r} is not a plain name")
