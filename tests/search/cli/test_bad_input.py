"""A corpus of bad input: each case exits 2 with one line on stderr naming the bad value, before any
paid work, and leaves runs/ and the registry as they were (in-process: the preflight refuses it
before Hydra starts)."""
from __future__ import annotations

from pathlib import Path

import pytest

from search.cli.main import main

CASES = [
    # compile (every Hydra command goes through the same preflight)
    (["compile", "+agent.foo=1"], "agent.foo: is not a setting"),
    (["compile", "+foo=1"], "foo: is not a setting"),
    (["compile", "+agent.workflow.0.color=red"], "agent.workflow[0].color: is not a setting"),
    (["compile", "agent.prompt_sections={}"], "an empty mapping changes nothing"),
    (["compile", "model.timeout_s=0"], "model.timeout_s: 0.0 is out of range"),
    (["compile", "model.timeout_s=-3"], "model.timeout_s: -3.0 is out of range"),
    (["compile", "model.retries=-1"], "model.retries: -1 is out of range"),
    (["compile", "model.backoff_s=-0.5"], "model.backoff_s: -0.5 is out of range"),
    (["compile", "model.max_tokens=-1"], "model.max_tokens: -1 is out of range"),
    (["compile", "model.concurrency=0"], "model.concurrency: 0 is out of range"),
    (["compile", "model.api_base=not-a-url"], "model.api_base: 'not-a-url' is not an http(s) URL"),
    (["compile", "model.input_cost_per_token=-1e-6"], "model.input_cost_per_token"),
    (["compile", "agent.name=../x"], "agent.name: '../x' is not a plain name"),
    (["compile", "agent.tool_format=xml"], "agent.tool_format: unknown tool format 'xml'"),
    (["compile", "agent.prompt_sections.role='{{ cycler.__init__.__globals__ }}'"], "template reaches outside its variables"),
    (["compile", "agent.prompt_sections.role='{{ 1/0 }}'"], "template failed to render (ZeroDivisionError"),
    (["evaluate", "model.api_base=ftp://x"], "model.api_base: 'ftp://x' is not an http(s) URL"),
    # search settings, all before anything is paid for
    (["search", "search.study=../../etc"], "search.study: '../../etc' is not a plain name"),
    (["search", "search.study=''"], "search.study: '' is not a plain name"),
    (["search", "search.study=/abs"], "search.study: '/abs' is not a plain name"),
    (["search", "search.study=registry"], "search.study: 'registry' is a folder evoharness itself keeps"),
    (["search", "search.train_limit=-1"], "search.train_limit: must be at least 1 or null, got -1"),
    (["search", "search.train_limit=0"], "search.train_limit: must be at least 1 or null, got 0"),
    (["search", "search.max_front_dev=0"], "search.max_front_dev: must be at least 1, got 0"),
    (["search", "search.max_failure_rate=2"], "search.max_failure_rate: must be a share in [0, 1], got 2.0"),
    (["search", "search.resamples=0"], "search.resamples: must be at least 100, got 0"),
    (["search", "search.min_effect=-1"], "search.min_effect: must be 0 or more, got -1.0"),
    (["search", "search.models=[../../x]"], "search.models[0]: '../../x' is not a plain name"),
    (["search", "search.teacher=../x"], "search.teacher: '../x' is not a plain name"),
    (["search", "search.rounds=0"], "search.rounds: must be at least 1, got 0"),
    (["search", "search.crossover=nope"], "search.crossover: unknown crossover 'nope'"),
    (["search", "mutators.enabled=[{name: nope}]"], "mutators.enabled[0].name: unknown mutator 'nope'"),
    (["search", "mutators.enabled=[{name: rule_miner, params: {top_k: 0}}]"], "mutators.enabled[0].params.top_k"),
    (["search", "criteria.criteria.0.kind=nope"], "criteria.criteria[0].kind: 'nope' is not a criterion kind"),
    # the registry commands
    (["versions", "--registry", "/etc/passwd"], "is a file, not a registry folder"),
    (["versions", "--registry", "/etc"], "is not a registry"),
    (["promote", "nope", "--registry", "/etc/passwd"], "is a file, not a registry folder"),
]


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: str) -> None:
    monkeypatch.chdir(tmp_path)  # a default runs/ would land here
    registry = tmp_path / "registry"
    registry.mkdir()
    before = files(tmp_path)
    extra = [] if argv[0] in ("versions", "promote") else [f"runs_dir={tmp_path / 'runs'}", f"registry_dir={registry}"]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert expected in err, err
    assert files(tmp_path) == before  # no runs/, no Hydra output dir, no registry file
