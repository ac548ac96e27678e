"""search.models / search.teacher name model config files: a bad name, a missing file, broken YAML,
a file that is not a mapping and a setting the schema lacks are each one ConfigError naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.search.optimise.models_conf import load_model_config


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "good.yaml").write_text("route: sim/small\nconcurrency: 4\n", encoding="utf-8")
    (tmp_path / "model" / "broken.yaml").write_text("route: sim/small\n  bad: [unclosed\n", encoding="utf-8")
    (tmp_path / "model" / "listy.yaml").write_text("- route\n- sim/small\n", encoding="utf-8")
    (tmp_path / "model" / "extra.yaml").write_text("route: sim/small\ncolour: red\n", encoding="utf-8")
    (tmp_path / "model" / "leaky.yaml").write_text("route: sim/small\nextra: {api_key: sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789}\n",
                                                   encoding="utf-8")
    return tmp_path


def test_a_good_file_is_read_against_the_schema(conf: Path) -> None:
    m = load_model_config("good", [conf])
    assert m["route"] == "sim/small" and m["concurrency"] == 4 and m["retries"] == 3  # schema defaults filled in


@pytest.mark.parametrize("name, expected", [
    ("../good", "is not a plain name"),
    ("missing", "no model config named 'missing'"),
    ("broken", "broken.yaml is not valid YAML"),
    ("listy", "does not hold a mapping"),
    ("extra", "colour"),
    ("leaky", "looks like a credential"),  # it would travel in every job spec: refused as model=<name> is
])
def test_bad_model_configs_are_one_error(conf: Path, name: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_model_config(name, [conf], path="search.models[0]")
    assert str(err.value).startswith("search.models[0]") and expected in str(err.value) and "\n" not in str(err.value)
