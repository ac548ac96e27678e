"""A trial's result is typed and versioned; the study's store of finished evaluations is read back
only when it is exactly the evaluation of the variant asked for."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.workload import Failure
from evoharness.compiler.variant import compile_agent
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.metrics import aggregate
from evoharness.search.mutators.base import FailedEpisode
from evoharness.search.optimise.trial import TrialResult, TrialSpec, stored_result
from tests.compiler.fixtures import configs


def result(label: str = "r0-t1") -> TrialResult:
    agent, tool, model = configs()
    variant = compile_agent(agent, tool=tool, model=model)
    episode = EpisodeResult(task_id="t/1", sample=0, status="scored", passed=False, score=0.0, named={}, delivered=True,
                            safety_violations=0, cost_usd=0.002, latency_s=1.5, prompt_tokens=10, completion_tokens=3,
                            model_calls=1, tool_calls=1, tool_errors=1, detail="ls: wrong value for 'path'")
    report = aggregate([episode], variant_hash=variant.content_hash, split="train", samples=1)
    return TrialResult(label=label, split="train", variant=variant, report=report,
                       evidence=(FailedEpisode("t/1", 0, "ls: wrong value for 'path'", ("ls: no such dir",),
                                               (Failure("wrong_value", "ls", "path", expected="/tmp", got="/temp", turn=0),)),))


def test_a_stored_result_reads_back_equal_and_marked_reused(tmp_path: Path) -> None:
    r = result()
    path = tmp_path / "evals" / "k.json"
    assert stored_result(path, r.variant) is None
    path.parent.mkdir()
    path.write_text(json.dumps(r.to_dict()), encoding="utf-8")
    back = stored_result(path, r.variant)
    assert back is not None and back.reused and not r.reused
    assert (back.report, back.evidence, back.variant_hash, back.label) == (r.report, r.evidence, r.variant_hash, r.label)
    assert back.evidence[0].failures[0].argument == "path"  # the scorer's record reads back as a record, not a mapping
    assert r.to_dict()["schema_version"] == 1 and next(iter(r.to_dict())) == "schema_version"


@pytest.mark.parametrize(
    "tamper, expected",
    [
        (lambda d: {**d, "variant_hash": "0" * 64}, "holds the evaluation of variant 000000000000"),
        (lambda d: {**d, "schema_version": 2}, "schema_version"),
        (lambda d: {k: v for k, v in d.items() if k != "report"}, "is not a stored evaluation (KeyError"),
        (lambda d: [1, 2], "a JSON object expected"),
        (lambda d: {**d, "split": "test"}, "is not a stored evaluation (ValueError: unknown split 'test'"),
        (lambda d: {**d, "evidence": [{**d["evidence"][0], "failures": [{"kind": "typo"}]}]}, "failure kind 'typo' is unknown"),
    ],
)
def test_a_stored_result_that_does_not_match_is_one_line_naming_the_file(tmp_path: Path, tamper: object, expected: str) -> None:
    r = result()
    path = tmp_path / "k.json"
    path.write_text(json.dumps(tamper(r.to_dict())), encoding="utf-8")  # type: ignore[operator]
    with pytest.raises(ConfigError) as err:
        stored_result(path, r.variant)
    message = str(err.value)
    assert str(path) in message and expected in message and "\n" not in message and message.count("Fix:") == 1


def test_a_stored_result_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text("{truncated", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a stored evaluation"):
        stored_result(path, result().variant)


def spec(tmp_path: Path) -> TrialSpec:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from evoharness.compiler.schema import register_configs
    from evoharness.conf import CONF_DIR
    from evoharness.search.genome import BASELINE
    from evoharness.search.optimise.mutation import first_pools
    from evoharness.search.optimise.run import SearchRun
    from evoharness.search.optimise.settings import RunSettings

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"runs_dir={tmp_path}", "workload.options.categories=[multi_turn_base]"])
    GlobalHydra.instance().clear()
    run = SearchRun(RunSettings.from_config(cfg, conf_dirs=[CONF_DIR]), launch=lambda specs: [])
    run.pools = first_pools(run.settings)
    return run.spec(BASELINE, "train", "r0-t1")


def test_a_spec_travels_as_one_override_safe_token_and_compiles_to_the_same_variant(tmp_path: Path) -> None:
    s = spec(tmp_path)
    token = s.encode()
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")  # no quote, space or brace
    back = TrialSpec.decode(token)
    assert back == s and back.variant().content_hash == s.variant().content_hash


@pytest.mark.parametrize("token", ["", "not base64!", "aGVsbG8=", "eJzLSM3JyVcozy_KSQEAGgQEXQ==", "eJyrrgUAAXUA-Q==",
                                   "eJyrrgUAAXUA+Q=="])
def test_a_token_that_is_not_a_spec_is_one_line(token: str) -> None:
    with pytest.raises(ConfigError, match=r"^trial: is not a search job's spec"):
        TrialSpec.decode(token)


def test_a_config_error_survives_the_pickle_a_launcher_sends_it_back_in() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(ConfigError("search.study", "is taken", "pick another")))
    assert isinstance(err, ConfigError) and err.path == "search.study" and str(err) == "search.study: is taken. Fix: pick another"


def test_a_spec_whose_variable_is_not_set_where_the_job_runs_is_one_line(tmp_path: Path) -> None:
    from dataclasses import replace

    s = spec(tmp_path)
    token = replace(s, agent={**s.agent, "description": "${oc.env:EVO_NOT_SET_ANYWHERE}"}).encode()
    with pytest.raises(ConfigError, match=r"environment variable\(s\) EVO_NOT_SET_ANYWHERE, which are not set where this job runs"):
        TrialSpec.decode(token)


def test_a_jobs_config_error_comes_back_whole_through_a_pickle() -> None:
    import pickle

    from evoharness.search.optimise.trial import JobInputError

    back = pickle.loads(pickle.dumps(JobInputError(ConfigError("tool", "replay missed", "record again"))))
    assert isinstance(back, JobInputError) and back.error.one_line() == "tool: replay missed. Fix: record again"


def test_a_launcher_that_fails_is_one_line_and_after_a_stop_request_an_interrupt(tmp_path: Path,
                                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from evoharness.search.optimise.run import SearchAborted, SearchInterrupted
    from evoharness.search.optimise.sweeper import NSGA2SweeperImpl, StopRequest

    class Broken:
        def launch(self, overrides: object, initial_job_idx: int) -> object:
            raise RuntimeError("A task has failed to un-serialize\nthe rest of a traceback")

    impl = NSGA2SweeperImpl()
    impl.launcher = Broken()  # type: ignore[assignment]
    with pytest.raises(SearchAborted, match=r"the launcher \(Broken\) could not run a batch of 1 jobs \(RuntimeError: A task has "
                                            r"failed to un-serialize\); every finished trial is kept"):
        impl.launch([spec(tmp_path)])
    impl.stop = StopRequest()
    impl.stop.requested = True
    with pytest.raises(SearchInterrupted):
        impl.launch([spec(tmp_path)])
    err = capsys.readouterr().err
    assert "the batch in flight was lost after the stop request (RuntimeError: A task has failed to un-serialize)" in err
    assert "the rest of a traceback" not in err


def test_a_jobs_failed_episodes_reach_the_mutators_as_they_were_scored_with_the_genome_that_failed_them(tmp_path: Path) -> None:
    from evoharness.search.genome import Genome
    from evoharness.search.optimise.mutation import front_evidence
    from evoharness.search.optimise.settings import StudyPaths
    from evoharness.search.optimise.study import TrialRecord

    r = result()
    paths = StudyPaths(dir=tmp_path, storage="sqlite://", storage_public="sqlite://")
    paths.evals.mkdir(parents=True)
    (paths.evals / "k.json").write_text(json.dumps(r.to_dict()), encoding="utf-8")
    # two genomes that compile to one variant share its stored evaluation: each reads it as its own
    a, b = Genome(toolset=1), Genome(toolset=2)
    front = [TrialRecord(number=n, round=0, state="COMPLETE", genome=g, eval_key="k") for n, g in enumerate((a, b))]
    front.append(TrialRecord(number=2, round=0, state="COMPLETE", genome=Genome(), eval_key="not-stored"))
    read = front_evidence(paths, front)
    assert [e.genome for e in read] == [a, b]
    assert all((e.task_id, e.sample, e.tool_errors, e.failures) == (r.evidence[0].task_id, 0, ("ls: no such dir",), r.evidence[0].failures)
               for e in read)
