"""User config dirs and plugins, through the real CLI: ``--config-dir``, ``hydra.searchpath``, a
plugin named by the ``plugins`` key and one found by its ``evoharness.plugins`` entry point. Each
brings YAML groups (and templates) that every command, its preflight included, composes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evoharness.search.optimise.models_conf import load_model_config

ROOT = Path(__file__).resolve().parents[2]


def run(cmd: str, *args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    entry = "evoharness.compiler.cli" if cmd == "compile" else "evoharness.search.cli.main"
    argv = [sys.executable, "-c", f"import sys; from {entry} import main; sys.exit(main(sys.argv[1:]))",
            *([] if cmd == "compile" else [cmd]), f"runs_dir={cwd / 'runs'}", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture()
def user_dir(tmp_path: Path) -> Path:
    """A user's config dir: a model that inherits sim_small (defaults list) at another temperature,
    an agent template of their own, and their own primary config choosing that model."""
    d = tmp_path / "myconf"
    (d / "model").mkdir(parents=True)
    (d / "model" / "my_small.yaml").write_text("defaults:\n  - sim_small\n  - _self_\n\ntemperature: 0.3\n", encoding="utf-8")
    (d / "templates").mkdir()
    (d / "templates" / "terse.md.j2").write_text("TERSE PROMPT for {{ agent_name }}\n{% for s in steps %}{{ s.name }};{% endfor %}\n",
                                                 encoding="utf-8")
    return d


def compiled(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = Path(proc.stdout.strip().split()[-1])
    return json.loads((path / "variant.json").read_text(encoding="utf-8"))


def test_a_config_dir_adds_models_and_templates_to_every_lookup(user_dir: Path, tmp_path: Path) -> None:
    v = compiled(run("compile", "--config-dir", str(user_dir), "model=my_small", "agent.template=terse.md.j2", cwd=tmp_path))
    assert v["model"]["route"] == "sim/small" and v["model"]["temperature"] == 0.3  # the inherited route, the user's temperature
    assert str(v["prompt_body"]).startswith("TERSE PROMPT for ")
    # the same folder through hydra.searchpath (appended after the package's conf/) works alike
    w = compiled(run("compile", f"hydra.searchpath=[{user_dir}]", "model=my_small", cwd=tmp_path))
    assert w["model"]["temperature"] == 0.3
    # without the folder the names are unknown, and the error says where it looked
    proc = run("compile", "model=my_small", cwd=tmp_path)
    assert proc.returncode == 2 and "config dirs searched:" in proc.stderr and "--config-dir" in proc.stderr
    proc = run("compile", "agent.template=terse.md.j2", cwd=tmp_path)
    assert proc.returncode == 2 and "no template named 'terse.md.j2'" in proc.stderr


def test_a_primary_config_of_ones_own_is_named_with_config_name(user_dir: Path, tmp_path: Path) -> None:
    """--config-dir adds a folder after the package's conf/ (Hydra's own order), so a user's own
    primary config is named with --config-name; every command composes it, the preflight included."""
    (user_dir / "myapp.yaml").write_text(textwrap.dedent("""\
        defaults:
          - evoharness_schema
          - agent: bfcl_agent
          - tool: bfcl
          - model: my_small
          - workload: bfcl
          - criteria: default
          - mutators: default
          - search: default
          - _self_
        runs_dir: runs
        """), encoding="utf-8")
    v = compiled(run("compile", "--config-dir", str(user_dir), "--config-name", "myapp", cwd=tmp_path))
    assert v["model"]["temperature"] == 0.3
    proc = run("compile", "--config-dir", str(user_dir), "--config-name", "myapp", "model=nope", cwd=tmp_path)
    assert proc.returncode == 2 and str(user_dir) in proc.stderr  # the preflight composed the same path
    proc = run("compile", "--config-name", "../etc/passwd", cwd=tmp_path)
    assert proc.returncode == 2 and "is not a plain name" in proc.stderr


def test_search_models_resolve_on_the_same_search_path(user_dir: Path, tmp_path: Path) -> None:
    from evoharness.conf import CONF_DIR

    m = load_model_config("my_small", [user_dir, Path(CONF_DIR)])
    assert m["route"] == "sim/small" and m["temperature"] == 0.3 and m["concurrency"] == 16  # composed: the defaults list applies
    # the search's preflight reads search.models through the command's search path
    proc = run("search", "search.models=[my_small]", "mutators.pool_size=1", cwd=tmp_path)
    assert proc.returncode == 2 and "no model config named 'my_small'" in proc.stderr and str(Path(CONF_DIR) / "model") in proc.stderr
    proc = run("search", "--config-dir", str(user_dir), "search.models=[my_small]", "mutators.pool_size=1", cwd=tmp_path)
    # my_small resolved; a later check stops it
    assert "my_small" not in proc.stderr and "mutators.pool_size: must be at least 2" in proc.stderr


PLUGIN = '''\
"""A plugin: registers a workload (BFCL's base category alone) and brings its config dir."""
from pathlib import Path

from evoharness.compiler.runtime.workload import register_workload
from evoharness.compiler.workloads.bfcl.workload import BfclWorkload

CONFIG_DIR = Path(__file__).parent / "conf"


@register_workload("bfcl_base_only")
def make(**options):
    return BfclWorkload(categories=["multi_turn_base"], **options)
'''


def plugin_package(site: Path, *, entry_point: bool) -> None:
    pkg = site / "evo_test_plugin"
    (pkg / "conf" / "workload").mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    (pkg / "conf" / "workload" / "bfcl_base_only.yaml").write_text(
        "defaults:\n  - workload_schema\n  - _self_\n\nname: bfcl_base_only\nsplit: dev\nlimit: 2\n", encoding="utf-8")
    if entry_point:  # an installed distribution's metadata, as pip writes it
        dist = site / "evo_test_plugin-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evo-test-plugin\nVersion: 0.1\n", encoding="utf-8")
        (dist / "entry_points.txt").write_text("[evoharness.plugins]\nbase_only = evo_test_plugin\n", encoding="utf-8")


@pytest.mark.parametrize("how", ["config key", "entry point"])
def test_a_plugin_registers_a_workload_and_its_config_dir(tmp_path: Path, how: str) -> None:
    site = tmp_path / "site"
    plugin_package(site, entry_point=how == "entry point")
    named = ["plugins=[evo_test_plugin]"] if how == "config key" else []
    proc = run("evaluate", *named, "workload=bfcl_base_only", "model=sim_small", cwd=tmp_path, pythonpath=site)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [path] = list((tmp_path / "runs").rglob("eval.json"))
    report = json.loads(path.read_text(encoding="utf-8"))
    assert len(report["tasks"]) == 2 and all("/multi_turn_base_" in t["task_id"] for t in report["tasks"])
    assert report["config"]["workload"]["name"] == "bfcl_base_only"


def test_a_broken_plugin_is_one_line_naming_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "evo_bad_plugin").mkdir(parents=True)
    (site / "evo_bad_plugin" / "__init__.py").write_text("raise RuntimeError('boom at import')\n", encoding="utf-8")
    proc = run("compile", "plugins=[evo_bad_plugin]", cwd=tmp_path, pythonpath=site)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "plugins[0]: cannot import plugin 'evo_bad_plugin' (RuntimeError: boom at import)" in proc.stderr
    proc = run("compile", "plugins=[../evil]", cwd=tmp_path)
    assert proc.returncode == 2 and "is not a module path" in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing written before the error


def test_a_primary_config_that_names_its_plugins_can_use_what_they_bring(tmp_path: Path) -> None:
    """The plugins key of a --config-name file is read before composing: its defaults may pick the plugin's options."""
    site = tmp_path / "site"
    plugin_package(site, entry_point=False)
    conf = tmp_path / "appconf"
    conf.mkdir()
    (conf / "myapp.yaml").write_text("defaults:\n  - config\n  - override workload: bfcl_base_only\n  - _self_\n\n"
                                     "plugins: [evo_test_plugin]\n", encoding="utf-8")
    proc = run("evaluate", "--config-dir", str(conf), "--config-name", "myapp", "model=sim_small", cwd=tmp_path, pythonpath=site)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [path] = list((tmp_path / "runs").rglob("eval.json"))
    assert json.loads(path.read_text(encoding="utf-8"))["config"]["workload"]["name"] == "bfcl_base_only"


@pytest.mark.parametrize("args, expected", [
    (["--config-name", "nope"], "--config-name nope: no primary config nope.yaml in the config dirs searched"),
    (["hydra.searchpath=[/no/such/folder]"], "hydra.searchpath: no such folder '/no/such/folder'"),
    (["plugins=[evo_exit_plugin]"], "plugins[0]: cannot import plugin 'evo_exit_plugin' (SystemExit: 3)"),
])
def test_bad_paths_and_plugins_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    site = tmp_path / "site"
    (site / "evo_exit_plugin").mkdir(parents=True)
    (site / "evo_exit_plugin" / "__init__.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    proc = run("compile", *args, cwd=tmp_path, pythonpath=site)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and expected in proc.stderr, proc.stderr
