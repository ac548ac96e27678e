"""BFCL tool catalog: JSON-schema conversion, mutates_state, gold-call parsing."""
from __future__ import annotations

import copy
import json

import pytest
from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

from evoharness.compiler.runtime.trajectory import ToolCall
from evoharness.compiler.toolspec import JSON_TYPES
from evoharness.compiler.workloads.bfcl.env import task_instances
from evoharness.compiler.workloads.bfcl.tools import (
    MULTI_TURN_CLASSES,
    BfclToolError,
    bfcl_tool_catalog,
    load_bfcl_tool_specs,
    parse_call,
    render_call,
    to_json_schema,
    tool_owner,
)
from evoharness.compiler.workloads.bfcl.workload import category_tasks


def _schema_types(node: object) -> list[object]:
    found: list[object] = []
    if isinstance(node, dict):
        if "type" in node:
            found.append(node["type"])
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    found.extend(_schema_types(sub))
            elif key in ("items", "additionalProperties"):
                found.extend(_schema_types(value))
    return found


def test_spec_count_matches_bfcl_docs() -> None:
    expected = 0
    for class_name in MULTI_TURN_CLASSES:
        path = MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
        expected += sum(1 for line in path.read_text().splitlines() if line.strip())
    specs = load_bfcl_tool_specs()
    assert len(specs) == expected == 128
    assert len(bfcl_tool_catalog()) == expected
    assert {spec.group for spec in specs} == set(MULTI_TURN_CLASSES)


def test_specs_are_memoized() -> None:
    assert load_bfcl_tool_specs() is load_bfcl_tool_specs()


def test_every_spec_is_a_json_schema_object() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for spec in load_bfcl_tool_specs():
        params = spec.parameters
        assert params["type"] == "object", spec.name
        assert isinstance(params["properties"], dict), spec.name
        assert set(params.get("required", [])) <= set(params["properties"]), spec.name
        for node_type in _schema_types(params):
            assert node_type in JSON_TYPES, (spec.name, node_type)
        jsonschema.Draft202012Validator.check_schema(params)
        json.dumps(spec.to_dict())


def test_schema_keeps_descriptions_defaults_items_required() -> None:
    ls = bfcl_tool_catalog()["ls"].parameters
    assert ls["properties"]["a"]["type"] == "boolean"
    assert ls["properties"]["a"]["default"] is False
    assert ls["properties"]["a"]["description"]
    mean = bfcl_tool_catalog()["mean"].parameters
    assert mean["properties"]["numbers"] == {
        "type": "array", "items": {"type": "number"},
        "description": mean["properties"]["numbers"]["description"],
    }
    assert mean["required"] == ["numbers"]


def test_type_conversion_including_tuple_and_any() -> None:
    converted = to_json_schema({
        "type": "dict",
        "properties": {
            "pair": {"type": "tuple", "items": {"type": "float"}},
            "anything": {"type": "any", "description": "free", "enum": ["x"]},
            "type": {"type": "string"},  # a parameter may be called "type"
        },
        "required": ["pair"],
    })
    assert converted == {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": {"type": "number"}},
            "anything": {"description": "free", "enum": ["x"]},
            "type": {"type": "string"},
        },
        "required": ["pair"],
    }


@pytest.mark.parametrize("name", ["mkdir", "mv", "cd", "rm", "post_tweet", "place_order",
                                  "book_flight", "lockDoors", "follow_user", "logout"])
def test_writers_mutate(name: str) -> None:
    assert bfcl_tool_catalog()[name].mutates_state


@pytest.mark.parametrize("name", ["ls", "cat", "grep", "pwd", "mean", "get_stock_info",
                                  "get_flight_cost", "get_current_speed", "view_messages_sent"])
def test_readers_do_not_mutate(name: str) -> None:
    assert not bfcl_tool_catalog()[name].mutates_state


def _observable_state(instance: object) -> object:
    # What mutates_state promises to cover: the public attributes BFCL compares, plus the
    # file system's working directory.
    public = {k: v for k, v in vars(instance).items() if not k.startswith("_")}
    cwd = getattr(instance, "_current_dir", None)
    path = []
    while cwd is not None:
        path.append(cwd.name)
        cwd = cwd.parent
    return copy.deepcopy(public), path


def test_mutates_state_agrees_with_gold_replays() -> None:
    changed: set[str] = set()
    used: set[str] = set()
    for category in ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func"):
        for task in category_tasks(category):
            instances = task_instances(task)
            for call in (c for turn in task.gold for c in turn):
                instance = instances[tool_owner(call.name)]
                before = _observable_state(instance)
                getattr(instance, call.name)(**copy.deepcopy(dict(call.arguments)))
                used.add(call.name)
                if _observable_state(instance) != before:
                    changed.add(call.name)
    catalog = bfcl_tool_catalog()
    declared = {name for name in used if catalog[name].mutates_state}
    assert changed == declared, {"observed only": changed - declared,
                                 "declared only": declared - changed}


def test_positional_gold_arguments_get_parameter_names() -> None:
    assert parse_call("sort('final_report.pdf')") == ToolCall("sort", {"file_name": "final_report.pdf"})
    assert parse_call("cd(folder='document')") == ToolCall("cd", {"folder": "document"})
    call = parse_call("estimate_distance('New York, NY', cityB='Boston, MA')")
    assert call.arguments == {"cityA": "New York, NY", "cityB": "Boston, MA"}
    assert parse_call("mean(numbers=[1.5, 2])").arguments == {"numbers": [1.5, 2]}


@pytest.mark.parametrize("source", ["sort(open('x'))", "os.system('ls')", "sort(", "1 + 2",
                                    "sort('a', 'b', 'c')", "sort(**{'file_name': 'x'})"])
def test_parse_call_rejects_non_literal_or_ill_fitting_calls(source: str) -> None:
    with pytest.raises(BfclToolError, match="BFCL call"):
        parse_call(source)


def test_unknown_tool_name_is_named() -> None:
    with pytest.raises(BfclToolError, match="'not_a_tool'"):
        parse_call("not_a_tool(x=1)")


def test_render_call_round_trips() -> None:
    for task in category_tasks("multi_turn_base")[:40]:
        for call in (c for turn in task.gold for c in turn):
            assert parse_call(render_call(call)) == call
