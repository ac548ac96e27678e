from __future__ import annotations

import pytest

from compiler.runtime.models import ModelClient
from compiler.variant import compile_agent
from tests.compiler.fixtures import configs


@pytest.mark.parametrize("route, opt_in, sent", [("openai/gpt-4o-mini", None, False), ("anthropic/claude-3-haiku", False, False),
                                                 ("sim/small", True, True), ("openai/sim/small", True, True)])
def test_the_episode_id_goes_only_to_routes_that_opt_in(route: str, opt_in: bool | None, sent: bool) -> None:
    agent, tool, model = configs()
    model = {**model, "route": route, **({} if opt_in is None else {"send_episode_id": opt_in})}
    v = compile_agent(agent, tool=tool, model=model)
    req = ModelClient(v.model, v.route).request([{"role": "user", "content": "hi"}], [], "task_id=bfcl/multi_turn_base_3;sample=0;seed=0")
    assert ("user" in req) is sent and (not sent or req["user"].startswith("task_id=bfcl/"))
    assert "bfcl/multi_turn_base_3" not in str({k: v for k, v in req.items() if k != "user"})


def test_the_opt_in_is_not_part_of_the_variant_hash() -> None:
    agent, tool, model = configs()
    a = compile_agent(agent, tool=tool, model={**model, "send_episode_id": True})
    b = compile_agent(agent, tool=tool, model={**model, "send_episode_id": False})
    assert a.content_hash == b.content_hash and a.route.send_episode_id and not b.route.send_episode_id
