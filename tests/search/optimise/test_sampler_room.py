"""After round 0, the last share of a round's budget is the sampler's: its recombinations of the
pooled entries, not only the mutators' proposals one at a time on their anchors."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from evoharness.compiler.errors import ConfigError
from evoharness.search.optimise.run import SearchRun

from tests.search.optimise.test_race import Surface, _round, make_settings


def _origins(settings, k: int) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(t.user_attrs.get("origin", "sampler")) for t in _round(settings, k).trials if t.state.is_finished()]


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_a_share_of_each_later_round_goes_to_the_sampler(tmp_path: Path, share: float) -> None:
    # two full evaluations' worth of episodes a round: the four proposals, each raced out after its
    # first block of 10 of the 20 tasks, fill it exactly
    settings = make_settings(tmp_path, "search.trials_per_round=2", f"search.sampler_share={share}")
    lines: list[str] = []
    SearchRun(settings, launch=Surface(), echo=lines.append).execute()
    origins = _origins(settings, 1)
    proposals = [o for o in origins if o.startswith("new:")]
    line = next(x for x in lines if x.startswith("round 1:"))
    if share:  # half the round: two proposals, then the sampler; the other two wait for a later round
        assert len(proposals) == 2 and "sampler" in origins, origins
        assert "2 not reached" in line, line
    else:  # the mutators' proposals fill the round, as before
        assert len(proposals) == 4 and "sampler" not in origins, origins
    assert not _round(settings, 1).get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_the_share_is_checked(tmp_path: Path) -> None:
    for bad in ("1.0", "-0.1", "nan"):
        with pytest.raises(ConfigError, match="search.sampler_share"):
            make_settings(tmp_path, f"search.sampler_share={bad}")
