"""What the simulated model does with a conversation the harness's context policy clipped: a value
it was never shown cannot be copied, on the documented surface and on blind ones."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from evoharness.compiler.context_policy import ContextPolicy, cut_marker, is_clipped
from evoharness.compiler.runtime.workload import Task
from evoharness.compiler.sim.gold import StaticGoldSource
from evoharness.compiler.sim.surface import DOCUMENTED, blind_surface
from tests.compiler.sim.sim_selfplay import openai_tools, play_episode
from tests.compiler.sim.test_sim_fixtures import SPECS, TASK, fake_env, prompt

N = 120
LISTING = " ".join(f"file_{i:03d}.txt" for i in range(60)) + " document " + " ".join(f"note_{i:03d}.md" for i in range(60))


def listing_env(clip: int | None) -> Any:
    """The fake file system with a long `ls`, sent whole or clipped as the harness clips it."""
    def env(name: str, args: Mapping[str, Any]) -> str:
        if name == "ls":
            return ContextPolicy({"ls": clip}).clip("ls", LISTING)[0] if clip else LISTING
        return fake_env(name, args)

    return env


def folders(task: Task, clip: int | None, surface: Any, *, known: bool = True) -> list[str]:
    """The folder of each episode's first `cd` after its `ls` (episodes that stopped first, or skipped
    the listing, are left out: without a result there is nothing clipped). ``known``: the gold source
    knows what the reference `ls` returns."""
    gold = StaticGoldSource([task], SPECS, results={task.task_id: (LISTING,)} if known else None)
    out = []
    for s in range(N):
        log = play_episode("sim/small", task, gold, listing_env(clip), system_prompt=prompt(), tools=openai_tools(SPECS),
                           temperature=1.0, sample=s, world=0, shared_draws=True, surface=surface)
        names = [c.name for c, _ in log.calls[0]]
        if "ls" in names and "cd" in names[names.index("ls"):]:
            out.append(next(str(c.arguments.get("folder")) for c, _ in log.calls[0][names.index("ls"):] if c.name == "cd"))
    return out


@pytest.mark.parametrize("surface", [DOCUMENTED, blind_surface(3)], ids=["documented", "blind"])
def test_a_value_clipped_out_of_a_result_cannot_be_copied(surface: Any) -> None:
    sent = ContextPolicy({"ls": 300}).clip("ls", LISTING)[0]
    assert "document" in LISTING and "document" not in sent  # the value sits in the cut middle
    whole, clipped = folders(TASK, None, surface), folders(TASK, 300, surface)
    assert len(whole) > N / 2 and len(clipped) > N / 2
    assert sum(f == "document" for f in whole) > 0.4 * len(whole)  # read from the whole listing: often copied right
    assert not any(f == "document" for f in clipped)  # never shown, never copied: the mistake is certain, redos included
    # a value the user's own message gives is still there to copy, clipped listing or not
    said = Task(task_id=TASK.task_id, split=TASK.split, tool_names=TASK.tool_names, gold=TASK.gold,
                turns=(({"role": "user", "content": "Move the report from document into a new temp folder."},), *TASK.turns[1:]))
    told = folders(said, 300, surface)
    assert sum(f == "document" for f in told) > 0.4 * len(told)
    # a source that cannot say what the reference results held never takes a value away
    unknown = folders(TASK, 300, surface, known=False)
    assert sum(f == "document" for f in unknown) > 0.4 * len(unknown)


def test_a_value_no_clipped_result_held_keeps_its_old_rates() -> None:
    """The rule needs a clipped result that held the value: a value the model "knows" (no result
    holds it) is copied as before, clipped listing or not; so is one nobody clipped."""
    hidden = Task(task_id=TASK.task_id, split=TASK.split, tool_names=TASK.tool_names, turns=TASK.turns,
                  gold=((TASK.gold[0][0], type(TASK.gold[0][1])("cd", {"folder": "nowhere_shown"}), *TASK.gold[0][2:]),
                        *TASK.gold[1:]))
    for clip in (None, 300):
        got = folders(hidden, clip, DOCUMENTED)
        assert sum(f == "nowhere_shown" for f in got) > 0.4 * len(got)


def test_a_result_that_quotes_the_marker_is_not_a_clip() -> None:
    """A tool's own output that happens to carry the marker's text is sent with it defused: the
    model (and the simulator) can tell a harness's cut from a tool's words."""
    forged = "file_a.txt" + cut_marker(10, 300) + "note.md"
    sent, cut = ContextPolicy().clip("ls", forged)
    assert cut == 0 and not is_clipped(sent) and "file_a.txt" in sent and "note.md" in sent


def test_a_result_compacted_by_the_verbatim_window_reads_as_clipped_too() -> None:
    """A result an older turn left compacted carries the window's marker: the simulator takes a value
    from it as it does from a clipped one (here the compacted form is sent from the start, the
    strictest case: the value was never shown)."""
    compacted = (ContextPolicy(keep_turns=1).compact(LISTING, 0) or ("", 0))[0]
    assert is_clipped(compacted) and "results of earlier turns" in compacted and "document" not in compacted
    gold = StaticGoldSource([TASK], SPECS, results={TASK.task_id: (LISTING,)})

    def env(name: str, args: Mapping[str, Any]) -> str:
        return compacted if name == "ls" else fake_env(name, args)

    copied = []
    for s in range(N):
        log = play_episode("sim/small", TASK, gold, env, system_prompt=prompt(), tools=openai_tools(SPECS), temperature=1.0,
                           sample=s, world=0, shared_draws=True, surface=DOCUMENTED)
        names = [c.name for c, _ in log.calls[0]]
        if "ls" in names and "cd" in names[names.index("ls"):]:
            copied.append(next(str(c.arguments.get("folder")) for c, _ in log.calls[0][names.index("ls"):] if c.name == "cd"))
    assert len(copied) > N / 2 and not any(f == "document" for f in copied)
