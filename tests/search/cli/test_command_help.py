"""Each config-driven command's --help says what it does and the overrides that matter, in under 40
lines, and every key it names is a key of the composed config."""
from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR
from evoharness.search.cli.main import hydra_commands, main


@pytest.mark.parametrize("command", sorted(hydra_commands()))
def test_help_leads_with_what_the_command_does(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith(f"usage: evoharness {command}") and len(lines) < 40
    assert lines[2][0].isupper() and "Overrides that matter most:" in text  # what it does, then the overrides
    assert text.rstrip().endswith(f"evoharness {command} --cfg job")
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config")
    keys = set(re.findall(r"(?<![\w.$])([a-z_]+(?:\.[a-z_]+)*)=", text)) - {"key"}  # "key=value" is the form itself
    assert keys  # the overrides it names ...
    missing = [k for k in keys if not k.endswith(".*") and OmegaConf.select(cfg, k, default="<missing>") == "<missing>"]
    assert missing == []  # ... are keys of the config: a help that names a key that is not there misleads
