"""Table tests on the pure error-probability function (compiler/sim/errors.py)."""
from __future__ import annotations

import dataclasses

import pytest

from evoharness.compiler.sim import errors
from evoharness.compiler.sim.errors import CallContext, call_error_rates
from evoharness.compiler.sim.features import extract_features
from evoharness.compiler.sim.tiers import TIERS
from tests.compiler.sim.sim_selfplay import openai_tools
from tests.compiler.sim.test_sim_fixtures import SPECS, prompt, spec

MV = CallContext("mv", ("source", "destination"), propagated=frozenset({"source"}))


def rates(fmt: str = "json", *, temperature: float = 0.0, specs=SPECS, sections=(("Role", "x"),),
          procedure=(), tier: str = "small", call: CallContext = MV):
    features = extract_features(prompt(fmt, sections=sections, procedure=procedure, specs=specs),
                                openai_tools(specs) if fmt != "bash" else None, temperature)
    return call_error_rates(TIERS[tier], features, call)


def with_spec(**changes):
    return tuple(spec("mv", ("source", "destination"), True, **changes) if s.name == "mv" else s
                 for s in SPECS)


def test_baseline_is_the_tier_base_rate_times_prompt_length():
    r = rates()
    features = extract_features(prompt(sections=(("Role", "x"),)), openai_tools(SPECS), 0.0)
    length = errors.common_factor(features)
    assert r.wrong_value["source"] == pytest.approx(TIERS["small"].wrong_value * length)
    assert r.wrong_tool == pytest.approx(TIERS["small"].wrong_tool * length)
    assert r.malformed == 0.0  # json never malformed


@pytest.mark.parametrize("fmt", ["json", "bash", "both"])
def test_missing_argument_description_raises_that_arguments_rate(fmt):
    documented, bare = rates(fmt), rates(fmt, specs=with_spec(arg_desc=""))
    assert bare.wrong_value["source"] > documented.wrong_value["source"]
    assert bare.wrong_value["source"] == pytest.approx(
        documented.wrong_value["source"] * (1 + errors.DOC_WEIGHT), rel=0.05)


def test_short_tool_description_raises_wrong_tool_rate():
    assert rates(specs=with_spec(desc="Move.")).wrong_tool > rates().wrong_tool
    assert rates(specs=with_spec(desc="")).wrong_tool > rates(specs=with_spec(desc="Move it.")).wrong_tool


def test_rule_naming_tool_and_argument_lowers_only_that_argument():
    ruled = dataclasses.replace(next(s for s in SPECS if s.name == "mv"),
                                rules=("copy source exactly from the ls output",))
    specs = tuple(ruled if s.name == "mv" else s for s in SPECS)
    base, r = rates(), rates(specs=specs)
    assert r.wrong_value["source"] < base.wrong_value["source"]
    assert r.propagation["source"] < base.propagation["source"]
    assert r.wrong_value["destination"] >= base.wrong_value["destination"] * 0.99  # longer prompt only
    assert r.wrong_tool < base.wrong_tool  # the rule names the tool


def test_rule_in_any_section_counts_but_tool_alone_does_not_lower_arguments():
    tool_only = rates(sections=(("Role", "x"), ("Policy", "Use mv carefully.")))
    both = rates(sections=(("Role", "x"), ("Policy", "For mv, check the source name.")))
    base = rates()
    assert tool_only.wrong_value["source"] >= base.wrong_value["source"]
    assert both.wrong_value["source"] < base.wrong_value["source"]


def test_example_naming_tool_lowers_its_rates():
    with_example = with_spec()
    with_example = tuple(dataclasses.replace(s, examples=("mv --source a.txt --destination b",))
                         if s.name == "mv" else s for s in with_example)
    for fmt in ("json", "bash"):
        assert rates(fmt, specs=with_example).wrong_value["source"] < rates(fmt).wrong_value["source"]
        assert rates(fmt, specs=with_example).wrong_tool < rates(fmt).wrong_tool


@pytest.mark.parametrize("kind", ["wrong_tool", "premature_stop"])
def test_temperature_raises_every_rate(kind):
    call = dataclasses.replace(MV, first_in_turn=False)
    values = [getattr(rates(temperature=t, call=call), kind) for t in (0.0, 0.5, 1.0, 1.5)]
    assert values == sorted(values) and values[0] < values[-1]
    assert rates(temperature=1.0).wrong_value["source"] == pytest.approx(
        2 * rates(temperature=0.0).wrong_value["source"])


def test_format_order_json_lowest_bash_highest_and_only_bash_malformed():
    json_r, both_r, bash_r = rates("json"), rates("both"), rates("bash")
    assert json_r.wrong_value["source"] < both_r.wrong_value["source"] < bash_r.wrong_value["source"]
    assert json_r.malformed == both_r.malformed == 0.0 < bash_r.malformed


def test_longer_prompt_slightly_raises_rates():
    short = rates()
    long = rates(sections=(("Role", "x"), ("Background", "lorem ipsum " * 2000)))
    assert short.wrong_value["source"] < long.wrong_value["source"] < 1.5 * short.wrong_value["source"]


@pytest.mark.parametrize("kind", ["wrong_tool", "malformed", "skip_read", "premature_stop"])
def test_tiers_are_ordered(kind):
    call = dataclasses.replace(MV, skippable_read=True, first_in_turn=False)
    small, medium, large = (getattr(rates("bash", tier=t, call=call), kind)
                            for t in ("small", "medium", "large"))
    assert small > medium > large > 0
    assert TIERS["small"].catch < TIERS["medium"].catch < TIERS["large"].catch
    assert TIERS["small"].recover < TIERS["medium"].recover < TIERS["large"].recover


def test_conditional_kinds_only_when_applicable():
    r = rates(call=CallContext("mv", ("source",), first_in_turn=True))
    assert r.propagation == {} and r.skip_read == 0.0 and r.premature_stop == 0.0


def test_procedure_lowers_premature_stop():
    call = dataclasses.replace(MV, first_in_turn=False)
    plain = rates(call=call)
    structured = rates(call=call, procedure=(("act", "call the tools"),))
    assert structured.premature_stop < plain.premature_stop


def test_undocumented_or_unoffered_tool_is_worst_and_rates_are_clipped():
    unknown = rates(call=CallContext("rm", ("file_name",)), temperature=2.0)
    assert unknown.wrong_value["file_name"] == pytest.approx(
        min(errors.MAX_P, unknown.wrong_value["file_name"]))
    huge = dataclasses.replace(TIERS["small"], wrong_value=1.0)
    features = extract_features(prompt(), openai_tools(SPECS), 2.0)
    assert call_error_rates(huge, features, MV).wrong_value["source"] == errors.MAX_P


def test_any_error_combines_kinds():
    r = rates(temperature=1.0)
    assert max(r.wrong_tool, *r.wrong_value.values()) < r.any_error() < 1
