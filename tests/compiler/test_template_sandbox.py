"""A template is data: prompt text from an override, a config file or a promoted snapshot renders in
Jinja2's sandbox, so an attribute walk to Python internals is a one-line error (exit 2) and runs
nothing, and work past a bound (loops, calls, text, integers, nesting, time) is one too."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import make_snapshot
from evoharness.compiler.render import render_text
from evoharness.compiler.template_budget import FIX
from evoharness.compiler.variant import compile_agent
from tests.compiler.fixtures import configs

ROOT = Path(__file__).resolve().parents[2]


def payloads(marker: Path) -> list[str]:
    cmd = f"touch {marker}"
    return [
        "{{ cycler.__init__.__globals__.os.popen('" + cmd + "').read() }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ lipsum.__globals__['os'].system('" + cmd + "') }}",
        "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
        "{{ self.__init__.__globals__ }}",
    ]


def compile_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "evoharness.compiler", f"runs_dir={tmp / 'runs'}", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("index", range(5))
def test_payload_in_a_config_file_raises_and_runs_nothing(tmp_path: Path, index: int) -> None:
    marker = tmp_path / "pwned"
    agent, tool, model = configs()
    file = tmp_path / "agent.yaml"
    file.write_text(yaml.safe_dump({**agent, "prompt_sections": {**agent["prompt_sections"], "role": payloads(marker)[index]}}))
    loaded = yaml.safe_load(file.read_text())
    with pytest.raises(ConfigError) as err:
        compile_agent(loaded, tool=tool, model=model)
    assert "agent.prompt_sections.role" in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


def test_payload_in_an_override_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = "{{ cycler.__init__.__globals__.os.popen(\"touch " + str(marker) + "\").read() }}"
    proc = compile_cli(tmp_path, f"agent.prompt_sections.role='{payload}'")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: agent.prompt_sections.role: template reaches outside")
    assert not marker.exists() and not (tmp_path / "runs").exists()


def test_payload_in_a_promoted_snapshot_exits_2_and_runs_nothing(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.config_compile import to_plain
    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR

    marker = tmp_path / "pwned"
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config")
    GlobalHydra.instance().clear()
    agent = to_plain(cfg.agent)
    agent["workflow"][0]["instructions"] = payloads(marker)[2]
    registry = Registry(str(tmp_path / "registry"))
    snap = make_snapshot("bfcl_agent", {"agent": agent, "tool_overrides": {}, "model": to_plain(cfg.model)}, author="forged")
    registry.promote(registry.write_snapshot(snap))  # loading and promoting a snapshot is data only: nothing ran
    assert not marker.exists()
    proc = compile_cli(tmp_path, f"registry_dir={tmp_path / 'registry'}")
    assert proc.returncode == 2 and "template reaches outside" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not marker.exists() and not (tmp_path / "runs").exists()


def test_ordinary_templates_still_render() -> None:
    agent, tool, model = configs()
    sections = {**agent["prompt_sections"], "role": "You are {{ agent_name }} for {{ team }}."}
    agent = {**agent, "vars": {"team": "ops"}, "prompt_sections": sections}
    assert "for ops." in compile_agent(agent, tool=tool, model=model).system_prompt


# Templates that ask for unbounded work (time or memory): each is a one-line error naming the config
# path and the bound, reached in well under a second or two and in a few MB. Before the bounds these
# hung a compile or took gigabytes.
DOUBLINGS = "{% set a0 = 'x' %}" + "".join(f"{{% set a{i + 1} = a{i} ~ a{i} %}}" for i in range(31)) + "{{ a31|length }}"
UNBOUNDED: list[tuple[str, str]] = [
    ("nested_loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
    ("string_repeat", '{{ ("x" * 2000000000)|length }}'),
    ("center_filter_folded_at_compile", '{{ "x"|center(2000000000) }}'),
    ("printf_width", '{{ "%0999999999d" % 1 }}'),
    ("str_format_width", '{{ "{:>999999999}".format(1) }}'),
    ("format_filter_width", '{{ "%999999999s"|format("x") }}'),
    ("int_power", "{{ 2 ** 2000000000 }}"),
    ("lipsum", "{{ lipsum(1000000) }}"),
    ("list_repeat", "{{ ([1] * 10**9)|length }}"),
    ("doubling_through_sets", DOUBLINGS),
    ("doubling_through_a_namespace", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                                     "{{ ns.s|length }}"),
    ("squaring_through_a_namespace", "{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}"
                                     "{{ ns.n > 0 }}"),
    ("branching_macro", "{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}"),
    ("macro_doubling_its_argument", "{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s|length }}{% endif %}"
                                    "{% endmacro %}{{ d('x', 40) }}"),
    ("deep_recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
    ("str_method_center", '{{ "x".center(2000000000)|length }}'),
    ("nested_format_width", '{{ "{:>{}}".format(1, 999999999)|length }}'),
    ("printf_star_width", '{{ ("%*d" % (999999999, 1))|length }}'),
    ("replace_filter", '{% set s = "x" * 1000 %}{{ (s * 1000)|replace("x", s)|length }}'),
    ("join_filter_separator", '{{ range(100000)|join("x" * 100000)|length }}'),
    ("str_join_method", '{{ ("x" * 100000).join(range(100000)|map("string"))|length }}'),
    ("str_translate_table", '{{ ("x" * 100000).translate({120: "y" * 100000})|length }}'),
    ("indent_width", '{{ ("x\\n" * 100000)|indent(100000)|length }}'),
    ("wordwrap_wrapstring", '{{ ("a " * 100000)|wordwrap(1, wrapstring="y" * 100000)|length }}'),
    ("tojson_indent", "{{ [[[[[[[[1]]]]]]]]|tojson(indent=100000000)|length }}"),
    ("int_to_bytes", '{{ (2).to_bytes(2000000000, "big")|length }}'),
    ("batch_fill", "{{ [1]|batch(1000000000, 0)|list|length }}"),
    ("slice_count", "{{ [1]|slice(100000000)|list|length }}"),
    ("round_precision", "{{ 1.5|round(1000000000, 'floor') }}"),
    ("long_output", '{% set s = "x" * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}'),
    ("macro_output", '{% macro m() %}{% for i in range(100000) %}{{ "x" * 1000000 }}{% endfor %}{% endmacro %}{{ m()|length }}'),
    ("printing_a_repeated_list", '{% set s = "x" * 1000000 %}{{ [s] * 100000 }}'),
    ("recursive_loop", "{% for x in [1, 1] recursive %}{{ loop([1, 1]) }}{% endfor %}"),
    ("lazy_filter_chain", "{{ range(100000)|map('string')|map('center', 100000)|join|length }}"),
]


@pytest.mark.parametrize("payload", [p for _, p in UNBOUNDED], ids=[name for name, _ in UNBOUNDED])
def test_unbounded_work_is_refused_quickly_in_little_memory(payload: str) -> None:
    agent, tool, model = configs()
    agent = {**agent, "prompt_sections": {**agent["prompt_sections"], "role": payload}}
    tracemalloc.start()
    start = time.thread_time()  # CPU: the machine's load does not count
    try:
        with pytest.raises(ConfigError) as err:
            compile_agent(agent, tool=tool, model=model)
        elapsed, peak = time.thread_time() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert message.startswith("agent.prompt_sections.role: template exceeds a render bound: ") and "\n" not in message, message
    bound = r"(\d[\d,]* (loop iterations|characters|bits)|number above [\d,]+|deeper than \d+|longer than [\d.]+ s)"
    assert re.search(bound, message), message
    assert message.endswith(f"Fix: {FIX}")
    assert elapsed < 5, f"{elapsed:.1f} s"  # the clock bound is 2 s; tracemalloc slows the rest
    assert peak < 64 << 20, f"{peak >> 20} MB"


@pytest.mark.parametrize("where", ["workflow", "template"])
def test_the_bounds_hold_wherever_template_text_comes_from(tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.compiler import template_budget

    monkeypatch.setattr(template_budget, "MAX_SECONDS", 60.0)  # the loop bound is the one under test, on any machine
    agent, tool, model = configs()
    payload = UNBOUNDED[0][1]
    if where == "workflow":
        agent["workflow"][0]["instructions"] = payload
        expected = "agent.workflow[plan].instructions: template exceeds a render bound: more than"
        with pytest.raises(ConfigError, match=re.escape(expected)):
            compile_agent(agent, tool=tool, model=model)
    else:
        from evoharness.compiler.render import render_system_prompt

        (tmp_path / "bomb.md.j2").write_text(payload + "{{ sections|length }}", encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape("agent.template: template exceeds a render bound: more than")):
            render_system_prompt(template="bomb.md.j2", sections={}, steps=[], tools=[], context={}, template_dirs=[str(tmp_path)])


def test_each_bound_names_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.compiler import template_budget

    def problem(text: str) -> str:
        with pytest.raises(ConfigError) as err:
            render_text("agent.prompt_sections.role", text, {})
        return err.value.problem

    monkeypatch.setattr(template_budget, "MAX_SECONDS", 60.0)  # so a slow machine reaches the step bound first
    steps = "{% for i in range(1000) %}{% for j in range(1001) %}{% endfor %}{% endfor %}"
    assert problem(steps) == "template exceeds a render bound: more than 1,000,000 loop iterations and calls"
    assert render_text("p", steps.replace("1001", "990"), {}) == ""  # just under it: 991,000 iterations, 1,001 range() calls
    monkeypatch.setattr(template_budget, "MAX_SECONDS", 0.2)
    assert problem(UNBOUNDED[12][1]) == "template exceeds a render bound: rendering took longer than 0.2 s of CPU"
    assert problem('{{ "x" * 1000001 }}') == "template exceeds a render bound: the * operator would build more than 1,000,000 characters"
    assert problem("{{ 2 ** 14001 }}") == "template exceeds a render bound: the ** operator would build an integer wider than 14,000 bits"
    assert problem(UNBOUNDED[14][1]) == "template exceeds a render bound: calls nest deeper than 50"
    assert problem('{% for i in range(2) %}{{ "x" * 600000 }}{% endfor %}') == (
        "template exceeds a render bound: the rendered text would be longer than 1,000,000 characters")


def test_an_unbounded_override_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from evoharness.search.cli.main import main

    monkeypatch.chdir(tmp_path)
    override = "agent.prompt_sections.role='{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}'"
    start = time.monotonic()
    try:  # as tests/search/cli/test_bad_input.py drives it: Hydra commands return the code, argparse exits
        code = main(["compile", override, f"runs_dir={tmp_path / 'runs'}"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2 and time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert err.startswith("error: agent.prompt_sections.role: template exceeds a render bound: ") and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()


CONTROL = """\
{% macro row(t, i) %}{{ i }}. {{ t.name|upper }}{{ " (writes)" if t.writes else "" }}: {{ t.text|wordwrap(60)|indent(3) }}{% endmacro %}
{% set ns = namespace(writes=0) %}
{% for t in tools %}{% if t.writes %}{% set ns.writes = ns.writes + 1 %}{% endif %}{{ row(t, loop.index) }} [{{ loop.length }}]
{% endfor %}
{{ ns.writes }} of {{ tools|length }} tools write; names: {{ tools|map(attribute="name")|join(", ") }}
{{ "%-8s|%5.2f|%03d" % ("pad", 3.14159, 7) }} {{ "{:>6}|{:,}|{!r}".format("r", 1234567, "q") }} {{ "%s and %s"|format("a", "b") }}
{{ (agent_name ~ "-") * 3 }} {{ 2 ** 64 }} {{ range(100000)|sum }} {{ "x"|center(9) }}| {{ tools|map(attribute="name")|batch(2, "-")|list }}
{{ tools[0]|tojson(indent=2) }} {{ tools|selectattr("writes")|map(attribute="name")|list }} {{ "a-b"|replace("-", "+") }}
{% set block %}{% for c in "abc" %}{{ c ~ loop.revindex }}{% endfor %}{% endset %}{{ block }}
{% filter upper %}shout {{ agent_name }}{% endfilter %}
{% for node in tree recursive %}<{{ node.name }}{% if node.children %} {{ loop(node.children) }}{% endif %}>{% endfor %}
{{ ", ".join(["x", "y"]) }} {{ "a\tb".expandtabs(4) }} {{ "ab".ljust(4, ".") }} {{ text|length }} {{ text[:40] }}"""


def test_ordinary_templates_render_as_plain_jinja_does() -> None:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    tools = [{"name": f"tool_{i}", "writes": i % 3 == 0, "text": f"Tool {i} does a thing. " * 12} for i in range(40)]
    tree = [{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c", "children": [{"name": "d", "children": []}]}]}]
    context = {"agent_name": "files_agent", "tools": tools, "tree": tree, "text": "moderate text. " * 20000}
    plain = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    expected = plain.from_string(CONTROL).render(**context).strip()
    assert render_text("agent.prompt_sections.role", CONTROL, context) == expected
    assert "tool_39" in expected and "<a <b><c <d>>>" in expected and "4999950000" in expected


def test_the_bounds_hold_for_a_whole_compile_not_each_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each section alone is under the loop bound; twenty of them together are not."""
    from evoharness.compiler import template_budget

    monkeypatch.setattr(template_budget, "MAX_SECONDS", 60.0)  # the loop bound is the one under test, on any machine
    agent, tool, model = configs()
    heavy = "{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}x"  # 100,100 steps: a tenth of the bound
    sections = {f"s{k}": heavy for k in range(20)}
    compile_agent({**agent, "prompt_sections": {f"s{k}": heavy for k in range(2)}}, tool=tool, model=model)  # two are fine
    start = time.thread_time()
    with pytest.raises(ConfigError, match=r"agent\.prompt_sections\.s9: template exceeds a render bound: .*1,000,000 loop iterations"):
        compile_agent({**agent, "prompt_sections": sections}, tool=tool, model=model)
    assert time.thread_time() - start < 30


def test_importing_the_tools_is_not_template_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU backstop counts template work only: a tool module that is slow to import (torch, say)
    does not use it up before the first template renders."""
    import sys

    from evoharness.compiler import template_budget

    (tmp_path / "slow_tools_for_bounds.py").write_text(
        "import time\nstart = time.thread_time()\nwhile time.thread_time() - start < 0.4:\n    pass\n\n\n"
        "def lookup(query: str) -> str:\n    \"\"\"Look something up.\n\n    Args:\n        query: what to look up\n    \"\"\"\n"
        "    return query\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_tools_for_bounds", raising=False)
    monkeypatch.setattr(template_budget, "MAX_SECONDS", 0.2)
    agent, tool, model = configs()
    tool = {**tool, "callables": ["slow_tools_for_bounds.lookup"]}
    variant = compile_agent({**agent, "tools": [*agent["tools"], "lookup"]}, tool=tool, model=model)
    assert "lookup" in [t.name for t in variant.tools]
