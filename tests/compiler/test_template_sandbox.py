"""A template is data: prompt text from an override, a config file or a promoted snapshot renders in
Jinja2's sandbox, so an attribute walk to Python internals is a one-line error (exit 2) and runs
nothing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compiler.errors import ConfigError
from compiler.release.registry import Registry, make_snapshot
from compiler.variant import compile_agent
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
    return subprocess.run([sys.executable, "-m", "compiler", f"runs_dir={tmp / 'runs'}", *args], cwd=tmp, env=env,
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

    from compiler.config_compile import to_plain
    from compiler.schema import register_configs
    from conf import CONF_DIR

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
