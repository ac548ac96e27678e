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
        placed = sorted(int(t.user_attrs["queue_index"]) for t in _round(settings, 1).trials if "queue_index" in t.user_attrs)
        assert placed == list(range(len(placed)))  # each queued trial once, in queue order
    else:  # the mutators' proposals fill the round, as before
        assert len(proposals) == 4 and "sampler" not in origins, origins
    assert not _round(settings, 1).get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_the_share_is_checked(tmp_path: Path) -> None:
    for bad in ("1.0", "-0.1", "nan"):
        with pytest.raises(ConfigError, match="search.sampler_share"):
            make_settings(tmp_path, f"search.sampler_share={bad}")
    with pytest.raises(ConfigError, match="search.race.growth"):  # slower growth: looks whose error rates were never measured
        make_settings(tmp_path, "search.race.growth=1.5")


def test_a_round_killed_while_its_queue_was_fed_goes_on_after_the_last_trial_enqueued() -> None:
    from types import SimpleNamespace

    from evoharness.search.optimise.rounds import Rounds
    from evoharness.search.optimise.seeding import Queued

    study = optuna.create_study(directions=["maximize"])
    queue = [Queued({"x": i}, {"origin": f"new:m{i}"}) for i in range(20)]
    rounds = SimpleNamespace(s=SimpleNamespace(population_size=6))

    def feed() -> None:
        Rounds._top_up(rounds, study, queue, (), queued_until=1e9)  # type: ignore[arg-type]

    def drain(n: int) -> None:
        for _ in range(n):
            t = study.ask({"x": optuna.distributions.IntDistribution(0, 100)})
            study.tell(t, 0.5)

    feed()
    drain(2)
    feed()  # a resume while trials still wait: nothing is added
    assert len(study.trials) == 6
    drain(4)
    study.enqueue_trial({"x": 6}, user_attrs={**queue[6].attrs, "queue_index": 6})  # killed after one of the next batch
    feed()  # one still waits: nothing added
    drain(1)
    feed()
    places = [t.user_attrs["queue_index"] for t in study.trials]
    assert places == list(range(13)), places  # every place once, in order, after the kill


def test_a_round_queued_whole_by_an_earlier_version_gets_nothing_again() -> None:
    from types import SimpleNamespace

    from evoharness.search.optimise.rounds import Rounds
    from evoharness.search.optimise.seeding import Queued

    study = optuna.create_study(directions=["maximize"])
    queue = [Queued({"x": i}, {"origin": f"new:m{i}"}) for i in range(8)]
    for q in queue:
        study.enqueue_trial(q.params, user_attrs=q.attrs)
    for _ in queue:
        study.tell(study.ask({"x": optuna.distributions.IntDistribution(0, 100)}), 0.5)
    Rounds._top_up(SimpleNamespace(s=SimpleNamespace(population_size=6)), study, queue, (), queued_until=1e9)  # type: ignore[arg-type]
    assert len(study.trials) == len(queue)
