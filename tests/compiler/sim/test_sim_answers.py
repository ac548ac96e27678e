"""A task with reference answers: the simulator ends a turn that went as it should with the
answer text verbatim (so an answer-scored workload can be passed), and never leaks it otherwise."""
from __future__ import annotations

from dataclasses import replace

from evoharness.compiler.sim.gold import StaticGoldSource
from tests.compiler.sim.sim_selfplay import openai_tools, play_episode
from tests.compiler.sim.test_sim_fixtures import SPECS, TASK, fake_env, prompt

ANSWERS = ("Moved final_report.pdf into temp.", "budget appears on line 4.", "No flights to Mars are available.")


def finals(task: object, model: str = "sim/large") -> list[str]:
    log = play_episode(model, task, StaticGoldSource([task], SPECS), fake_env, system_prompt=prompt(),  # type: ignore[arg-type]
                       tools=openai_tools(SPECS), temperature=0.0)
    return [r.rendered.content or "" for r in log.results if not r.rendered.tool_calls]


def test_turns_that_end_as_they_should_give_the_reference_answer() -> None:
    with_answers = replace(TASK, answers=ANSWERS)
    texts = finals(with_answers)
    assert len(texts) == 3
    # a turn with calls that finished, and a turn that needs no call, each answer verbatim
    assert texts[1] == ANSWERS[1] and texts[2] == ANSWERS[2]
    # without answers the same episode gives the simulator's own wording, never the reference text
    plain = finals(TASK)
    assert len(plain) == 3 and not any(a in t for t in plain for a in ANSWERS)


def test_a_turn_without_a_reference_answer_keeps_the_usual_text() -> None:
    partial = replace(TASK, answers=(None, "budget appears on line 4."))
    texts = finals(partial)
    assert texts[1] == "budget appears on line 4." and texts[0] != "" and "budget appears" not in texts[0]
    assert texts[2] != ""  # the third turn has no entry: the usual text
