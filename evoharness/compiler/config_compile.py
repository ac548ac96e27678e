"""From a composed Hydra config to a HarnessVariant (pure: no disk)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from evoharness.compiler.schema import ContextConfig, EscalationConfig
from evoharness.compiler.variant import HarnessVariant, canonical_json, compile_agent

_COMPILED: dict[str, HarnessVariant] | None = None  # plain (agent, tool, model) -> variant, while a command shares them


def to_plain(node: Any) -> Any:
    """A config node as plain dicts and lists, interpolations resolved; anything else as it is."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


# agent settings whose schema default means "not used": left out of the plain agent, so a config
# that does not use them hashes (study, snapshot) as it did before they existed
_UNUSED = {key: OmegaConf.to_container(OmegaConf.structured(schema)) for key, schema in (("context", ContextConfig),
                                                                                         ("escalation", EscalationConfig))}
# settings added to one of them later, left out when unused: a config that sets the older ones keeps its hash
_UNUSED_LATER = {"context": {"keep_turns": None, "tools_per_turn": None}}


def plain_agent(node: Any) -> Any:
    """``to_plain`` of an agent config, without the settings it leaves at their unused default."""
    agent = to_plain(node)
    if isinstance(agent, dict):
        for key, unused in _UNUSED.items():
            if agent.get(key) == unused:
                agent.pop(key, None)
            elif isinstance(agent.get(key), dict):
                for sub, default in _UNUSED_LATER.get(key, {}).items():
                    if sub in agent[key] and agent[key][sub] == default:
                        agent[key].pop(sub)
    return agent


@contextlib.contextmanager
def sharing_variants() -> Iterator[None]:
    """For one command: its pre-run checks and its run compile each configuration once. Never
    longer: the next command sees an edited template or tool catalog."""
    global _COMPILED
    outer = _COMPILED
    _COMPILED = {} if outer is None else outer
    try:
        yield
    finally:
        _COMPILED = outer


def compile_config(cfg: DictConfig) -> HarnessVariant:
    agent, tool, model = plain_agent(cfg.agent), to_plain(cfg.tool), to_plain(cfg.model)
    if _COMPILED is None:
        return compile_agent(agent, tool=tool, model=model)
    try:
        key = canonical_json([agent, tool, model])
    except (TypeError, ValueError):  # not JSON (a NaN): compiled afresh, and its checks say what is wrong
        return compile_agent(agent, tool=tool, model=model)
    if key not in _COMPILED:
        _COMPILED[key] = compile_agent(agent, tool=tool, model=model)
    return _COMPILED[key]
