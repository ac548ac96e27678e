"""Settings left at their unused default are not part of a config's plain agent: a study or a
snapshot made before they existed keeps its hash."""
from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from evoharness.compiler.config_compile import plain_agent
from evoharness.compiler.schema import register_configs
from evoharness.conf import CONF_DIR


def agent(*overrides: str) -> dict:
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return plain_agent(compose(config_name="config", overrides=list(overrides)).agent)
    finally:
        GlobalHydra.instance().clear()


def test_unused_context_and_escalation_leave_the_agent_as_it_was() -> None:
    base = agent()
    assert "context" not in base and "escalation" not in base
    # triggers without a model: nothing escalates, but a config that says so is kept (and checked at compile)
    assert agent("agent.escalation.on=[review]")["escalation"] == {"model": None, "on": ["review"]}
    used = agent("+agent.context.tool_result_chars.ls=500", "+model@agent.escalation.model=sim_large")
    assert used["context"] == {"tool_result_chars": {"ls": 500}} and used["escalation"]["model"]["route"] == "sim/large"
    assert {k: v for k, v in used.items() if k not in ("context", "escalation")} == base
    # the verbatim window came later: set, it is kept; unset, a clip alone hashes as it did before it
    assert agent("agent.context.keep_turns=2")["context"] == {"tool_result_chars": {}, "keep_turns": 2}
