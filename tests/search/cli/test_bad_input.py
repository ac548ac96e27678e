"""A corpus of bad input: each case exits 2 with one line on stderr naming the bad value, before any
paid work, and leaves runs/ and the registry as they were (in-process: the preflight refuses it
before Hydra starts)."""
from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.release.snapshot import make_snapshot
from evoharness.search.cli.main import main
from evoharness.search.records.versions import versioned

Setup = Callable[[Path, pytest.MonkeyPatch], list[str]]  # writes the bad input, returns argv to append

CASES: list[tuple[list[str], str]] = [
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
    (["evaluate", "cache_dir=redis://:Pw-3c9d@127.0.0.1:6379/0"], "cache_dir: the Redis URL carries a password"),
    (["evaluate", "cache_dir=redis://127.0.0.1:6379/x"], "the database 'x' is not a number"),
    (["evaluate", "cache_dir='redis://127.0.0.1:6379/0?password=Pw-3c9d'"], "the Redis URL carries options"),
    (["evaluate", "cache_dir=REDIS://127.0.0.1:6379/0"], "'REDIS':// is not a cache location"),
    (["evaluate", "cache_dir=unix:///tmp/redis.sock"], "'unix':// is not a cache location"),
    (["evaluate", "cache_dir='redis://127.0.0.1:6379/²'"], "the database '²' is not a number"),
    (["search", "cache_dir=redis://127.0.0.1:1/0"], "cache_dir: the Redis server at redis://127.0.0.1:1/0 does not answer"),
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
    (["search", "search.sampler=cmaes"], "search.sampler: unknown sampler 'cmaes'"),
    (["search", "mutators.enabled=[{name: nope}]"], "mutators.enabled[0].name: unknown mutator 'nope'"),
    (["search", "mutators.enabled=[{name: rule_miner, params: {top_k: 0}}]"], "mutators.enabled[0].params.top_k"),
    (["search", "criteria.criteria.0.kind=nope"], "criteria.criteria[0].kind: 'nope' is not a criterion kind"),
    # the registry commands
    (["versions", "--registry", "/etc/passwd"], "is a file, not a registry folder"),
    (["versions", "--registry", "/etc"], "is not a registry"),
    (["promote", "nope", "--registry", "/etc/passwd"], "is a file, not a registry folder"),
    # overrides Hydra cannot parse, and values of the wrong type
    (["compile", "agent.prompt_sections.role=a{b}"], "quote it for Hydra"),
    (["compile", "agent.prompt_sections.role=é"], "quote it for Hydra"),
    (["compile", "a..b=1"], "bad override 'a..b=1'"),
    (["compile", "agent.vars.x=1"], "write +agent.vars.x="),
    (["compile", "agent.context.tool_result_chars={*:4000}"], "+agent.context.tool_result_chars={*:...}"),
    (["compile", "agent.context.tool_result_chars={fs.read:4000}"], "+agent.context.tool_result_chars={fs.read:...}"),
    (["compile", "model.temperature=abc"], "model.temperature: Value 'abc'"),
    (["compile", "model.temperature=-1"], "model.temperature: must be in [0, 2]"),
    (["compile", "seed=abc"], "seed: Value 'abc'"),
    (["compile", "agent=nope"], "agent=nope: no such option in config group 'agent'"),
    (["compile", "model=nope"], "model=nope: no such option in config group 'model'"),
    (["compile", "agent.max_turns=0"], "agent.max_turns: must be at least 1, got 0"),
    (["compile", "agent.name=''"], "agent.name: '' is not a plain name"),
    (["compile", "tool.source=nope"], "tool.source: unknown tool catalog 'nope'"),
    (["compile", "tool.overrides.nope.description=x"], "tool.overrides.nope: Key 'nope' is not in struct"),
    (["compile", "+model.api_key=sk-abcdefghijklmnopqrstuvwxyz"], "put the variable's NAME in model.api_key_env"),
    (["compile", "agent.prompt_sections.role='{{ undefined_var }}'"], "undefined_var"),
    (["compile", "agent.prompt_sections.role='{{ x.__class__ }}'"], "template reaches outside its variables"),
    # folders the run would write into
    (["compile", "runs_dir=/etc/passwd/x"], "runs_dir: '/etc/passwd/x' is under /etc/passwd, which is a file"),
    (["compile", "runs_dir=/proc/evoharness"], "runs_dir: '/proc/evoharness' cannot be written"),
    (["evaluate", "cache_dir=/proc/evoharness"], "cache_dir: '/proc/evoharness' cannot be written"),
    # routes, keys and provider parameters, before the first call
    (["evaluate", "model.route=nope/x"], "model.route: litellm has no provider 'nope'"),
    (["evaluate", "model.route=noslash"], "model.route: not a litellm model string: 'noslash'"),
    (["evaluate", "model.route=sim/huge"], "the simulator has no model 'huge'"),
    (["evaluate", "model.api_key_env=EVOHARNESS_UNSET_VAR"], "model.api_key_env: environment variable EVOHARNESS_UNSET_VAR is not set"),
    (["evaluate", "+model.extra.sim_faults.bogus=1"], "unknown sim_faults knobs ['bogus']"),
    (["evaluate", "+model.extra.sim_faults.timeout_rate=abc"], "extra.sim_faults"),
    # the workload
    (["evaluate", "workload.split=nope"], "workload.split: unknown split 'nope'"),
    (["evaluate", "workload.limit=0"], "workload.limit: must be positive or null, got 0"),
    (["evaluate", "workload.samples=0"], "workload.samples: must be at least 1, got 0"),
    (["evaluate", "workload.concurrency=0"], "workload.concurrency: must be at least 1, got 0"),
    (["evaluate", "workload.name=nope"], "workload.name: unknown workload 'nope'"),
    (["evaluate", "+workload.options.nope=1"], "workload.options: "),
    (["evaluate", "workload=nope"], "workload=nope: no such option in config group 'workload'"),
    # more search settings
    (["search", "search.models=[nope]"], "search.models: no model config named 'nope'"),
    (["search", "search.teacher=nope"], "search.teacher: no model config named 'nope'"),
    (["search", "search.trials_per_round=0"], "search.trials_per_round: must be at least 1, got 0"),
    (["search", "search.population_size=1"], "search.population_size: must be at least 2, got 1"),
    (["search", "search.samples=0"], "search.samples: must be at least 1, got 0"),
    (["search", "search.confidence=2"], "search.confidence: must be in [0.5, 1), got 2.0"),
    (["search", "search.study=a/b"], "search.study: 'a/b' is not a plain name"),
    (["search", "search.temperatures=[-1]"], "search.temperatures: [-1.0] has a value outside [0, 2]"),
    (["search", "search.formats=[xml]"], "search.formats: unknown or empty tool formats ['xml']"),
    (["search", "criteria.criteria.0.threshold=abc"], "criteria.criteria[0].threshold: Value 'abc'"),
    (["search", "mutators.enabled=[{name: rule_miner, params: {nope: 1}}]"], "rule_miner() got an unexpected keyword argument 'nope'"),
    (["search", "search.models=[sim_medium]", "search.teacher=sim_large", "+model.extra.sim_faults.bogus=1"], "sim_faults knobs"),
    # the study's storage, opened once before any trial
    (["search", "search.storage='nope://x'"], "search.storage: 'nope://x' is not a database URL"),
    (["search", "search.storage='not a url'"], "search.storage: 'not a url' is not a database URL"),
    (["search", "search.storage='sqlite:////proc/nope/x.db'"], "search.storage: 'sqlite:////proc/nope/x.db' cannot be written"),
    (["search", "search.storage='mysql://u@127.0.0.1:1/db'"], "search.storage: 'mysql://u@127.0.0.1:1/db'"),
    # report, the registry commands and serve-sim: argparse's usage errors are one line too
    (["report"], "the following arguments are required: study"),
    (["report", "../x"], "study '../x' is not a plain name"),
    (["report", "nostudy"], "no search summary at runs/nostudy/summary.json"),
    (["promote", "nope"], "'nope' is neither a snapshot hash nor a .json path"),
    (["promote", "--bogus"], "the following arguments are required: ref"),
    (["promote", "abcdef", "--class", "../x"], "slot '../x' is not a valid slot name"),
    (["rollback", "nope"], "nope has nothing promoted in slot 'default'"),
    (["rollback", "bfcl_agent", "--class", "../x"], "slot '../x' is not a valid slot name"),
    (["versions", "--show", "nope"], "'nope' is neither a snapshot hash nor a .json path"),
    (["versions", "--bogus"], "unrecognized arguments: --bogus"),
    (["serve-sim", "--port", "99999"], "99999 is not a port (0-65535)"),
    (["serve-sim", "--port", "-1"], "-1 is not a port (0-65535)"),
    (["serve-sim", "--port", "abc"], "'abc' is not a port number"),
    (["serve-sim", "--timeout-rate", "2"], "timeout_rate=2.0 must be a probability in [0, 1]"),
    (["serve-sim", "--host", "192.0.2.1", "--port", "0"], "--host 192.0.2.1 is not a loopback address"),
    (["serve-sim", "--host", "0.0.0.0", "--port", "0"], "--host 0.0.0.0 is not a loopback address"),
    (["compile", "runs_dir="], "runs_dir: is empty"),
    (["compile", "--nope"], "unknown flag '--nope'"),
    (["compile", "hydra.foo=1"], "hydra.foo: Key 'foo' not in 'HydraConf'"),
    (["compile", "hydra/launcher=nope"], "hydra/launcher=nope: no such option in config group 'hydra/launcher'"),
    (["compile", "-m", "agent.tool_format=json,bash", "hydra.launcher.n_jobs='${evoharness.workers:abc}'"],
     "hydra.launcher.n_jobs: ${evoharness.workers:abc} needs a whole number"),
    (["compile", "-m", "agent.tool_format=json,bash", "hydra.launcher.n_jobs='${nope:3}'"],
     "hydra.launcher.n_jobs: Unsupported interpolation type nope"),
    (["compile", "-m", "agent.tool_format=json,bash", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs: 0 is not a number of workers"),
    (["search", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs: 0 is not a number of workers"),
    (["compile", "hydra.run.dir=/proc/evoharness"], "hydra.run.dir: '/proc/evoharness' cannot be written"),
    (["compile", "~agent"], "agent: Missing mandatory value"),
    (["compile", "+agent.prompt_sections.x='${oc.env:EVOHARNESS_UNSET_VAR}'"], "Environment variable 'EVOHARNESS_UNSET_VAR' not found"),
    (["compile", "+agent.prompt_sections.x='${nonexistent.key}'"], "Interpolation key 'nonexistent.key' not found"),
    (["compile", "model.input_cost_per_token=abc"], "model.input_cost_per_token: Value 'abc'"),
    (["search", "search.study=é"], "quote it for Hydra"),
    (["evaluate", "workload.split=holdout"], "workload.split: holdout is the sealed split"),
    (["search", "criteria.decision=nope"], "criteria.decision: unknown decision rule 'nope'"),
    (["search", "criteria.reference=nope"], "criteria.reference: unknown reference 'nope'"),
    (["search", "criteria.reference=sim_large"], "criteria.reference: 'sim_large' is the incumbent's own model"),
    (["search", "criteria.reference=base"], "criteria.reference: unknown reference 'base'"),
    (["search", "criteria.reference=../sim_small"], "criteria.reference: unknown reference '../sim_small'"),
    (["search", "criteria.reference=sim_small", "criteria.decision=best_quality"], "applies only to criteria.decision=cheapest_"),
    (["search", "criteria.margin=1.5"], "criteria.margin: must be in [0, 1), got 1.5"),
    (["search", "mutators.pool_size=0"], "mutators.pool_size: must be at least 2, got 0"),
    (["search", "mutators.enabled=[{name: identity, weight: -1}]"], "mutators.enabled[0].weight: must be 0 or more, got -1.0"),
    (["serve-sim", "--bogus"], "unrecognized arguments: --bogus"),
    # model.extra carries generation parameters only: nothing that redirects a request, carries a key or replaces the model
    (["evaluate", "+model.extra.api_base=http://127.0.0.1:9/v1"], "model.extra.api_base: has a setting of its own"),
    (["evaluate", "+model.extra.base_url=http://127.0.0.1:9/v1"], "model.extra.base_url: has a setting of its own"),
    (["evaluate", "+model.extra.mock_response=hi"], "model.extra.mock_response: decides where a request goes"),
    (["evaluate", "+model.extra.custom_llm_provider=openai"], "model.extra.custom_llm_provider: decides where"),
    (["evaluate", "+model.extra.extra_headers={X-Key: v}"], "model.extra.extra_headers: decides where"),
    (["evaluate", "+model.extra.success_callback=[x]"], "model.extra.success_callback: decides where"),
    (["evaluate", "+model.extra.nonsense_param=1"], "model.extra.nonsense_param: is not a generation parameter"),
    (["evaluate", "+model.extra.sim_bogus=1"], "model.extra.sim_bogus: the 'sim' provider declares no parameter 'sim_bogus'"),
    (["evaluate", "+model.extra.temperature=1"], "model.extra.temperature: has a setting of its own"),
    (["evaluate", "+model.extra.max_completion_tokens=1000000"], "model.extra.max_completion_tokens: has a setting of its own"),
    (["compile", "model.api_base=http://"], "model.api_base: 'http://' is not an http(s) URL with a host"),
    # every float setting is a finite number: NaN passes a plain "< 0" check and fails after the run is paid for
    (["evaluate", "model.input_cost_per_token=nan"], "model.input_cost_per_token: nan is not a finite number"),
    (["evaluate", "model.output_cost_per_token=inf"], "model.output_cost_per_token: inf is not a finite number"),
    (["evaluate", "model.timeout_s=inf"], "model.timeout_s: inf is not a finite number"),
    (["evaluate", "model.timeout_s=86400"], "model.timeout_s: 86400.0 is out of range"),
    (["evaluate", "model.timeout_s=nan"], "model.timeout_s: nan is not a finite number"),
    (["evaluate", "model.backoff_s=inf"], "model.backoff_s: inf is not a finite number"),
    (["compile", "model.retries=100000"], "model.retries: 100000 is out of range"),
    (["evaluate", "model.temperature=nan"], "model.temperature: nan is not a finite number"),
    (["evaluate", "criteria.margin=nan"], "criteria.margin: nan is not a finite number"),
    (["evaluate", "search.min_effect=nan"], "search.min_effect: nan is not a finite number"),
    (["evaluate", "+model.extra.top_p=nan"], "model.extra.top_p: nan is not a finite number"),
    (["search", "search.min_effect=nan"], "search.min_effect: nan is not a finite number"),
    (["search", "search.min_effect=0.5e1"], "search.min_effect: must be below 1"),
    (["search", "search.budget_usd=nan"], "search.budget_usd: nan is not a finite number"),
    (["search", "search.confidence=nan"], "search.confidence: nan is not a finite number"),
    (["search", "criteria.margin=nan"], "criteria.margin: nan is not a finite number"),
    (["search", "criteria.criteria.0.threshold=nan"], "criteria.criteria[0].threshold: nan is not a finite number"),
    (["search", "mutators.enabled.0.weight=nan"], "mutators.enabled[0].weight: nan is not a finite number"),
    (["serve-sim", "--time-scale", "inf"], "time_scale=inf must be a number in [0, 1000]"),
    (["serve-sim", "--time-scale", "nan"], "time_scale=nan must be a number in [0, 1000]"),
    # LLM mutators' routes, keys and endpoints, before round 0 is paid for
    (["search", "mutators.enabled=[{name: llm_prompt_rewriter, params: {route: nope/x}}]"],
     "mutators.enabled[0].params.route: litellm has no provider 'nope'"),
    (["search", "mutators.enabled=[{name: llm_workflow_editor, params: {route: sim/huge}}]"],
     "mutators.enabled[0].params: route 'sim/huge': the simulator has no model 'huge'"),
    (["search", "mutators.enabled=[{name: llm_prompt_rewriter, params: {api_key_env: EVOHARNESS_UNSET_VAR}}]"],
     "mutators.enabled[0].params.api_key_env: environment variable EVOHARNESS_UNSET_VAR is not set"),
    (["search", "mutators.enabled=[{name: teacher_gap_rewriter, params: {api_base: not-a-url}}]"],
     "mutators.enabled[0].params.api_base: 'not-a-url' is not an http(s) URL"),
    # settings that would run but measure nothing, or silently do something else
    (["compile", "agent.tools=[]"], "agent.tools: selects no tools"),
    (["compile", "+tool.definitions.ls={description: x}"], "tool.definitions.ls: has the name of a tool the catalog already has"),
    (["search", "criteria.criteria=[]"], "criteria.criteria: is empty"),
    (["search", "search.storage='sqlite://'"], "search.storage: 'sqlite://' is a database in memory"),
    (["search", "search.storage='sqlite:///:memory:'"], "is a database in memory"),
    (["compile", "-m", "agent.tool_format=json,bash", "hydra.launcher.n_jobs=-5"], "hydra.launcher.n_jobs: -5 is not a number of workers"),
    (["compile", "+trial=abc"], "trial: is the search's own per-job setting"),
    (["evaluate", "+trial=abc"], "trial: is the search's own per-job setting"),
    (["evaluate", "workload.split=holdout", "+trial=x"], "trial: is the search's own per-job setting"),
    (["search", f"search.study={'s' * 300}"], "search.study: 'sssssssss" + "s" * 31 + "'... (300 characters) is not a plain name"),
]


def _summary_of_wrong_shape(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp / "runs" / "s1").mkdir(parents=True)
    (tmp / "runs" / "s1" / "summary.json").write_text(json.dumps(versioned("summary", {"front": "not a list"})), encoding="utf-8")
    return ["report", "s1"]


def _summary_not_json(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp / "runs" / "s2").mkdir(parents=True)
    (tmp / "runs" / "s2" / "summary.json").write_text("{not json", encoding="utf-8")
    return ["report", "s2"]


_held: list[socket.socket] = []


def _busy_port(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _held.append(sock)  # closed by the test's finalizer below
    return ["serve-sim", "--port", str(sock.getsockname()[1])]


def _storage_not_a_database(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp / "notes.txt").write_text("hello\n", encoding="utf-8")
    return ["search", f"search.storage='sqlite:///{tmp / 'notes.txt'}'"]


def _snapshot(tmp: Path) -> Path:
    snap = make_snapshot("bfcl_agent", {"agent": {"name": "bfcl_agent"}, "tool_overrides": {}, "model": {"route": "sim/small"}},
                         author="tester", provenance={"claim": {"verdict": "win"}})
    path = tmp / "forged.json"
    path.write_text(json.dumps(snap.to_dict(), indent=2), encoding="utf-8")
    return path


def _tampered_snapshot(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    path = _snapshot(tmp)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["definition"]["model"]["route"] = "sim/large"
    path.write_text(json.dumps(data), encoding="utf-8")
    return ["promote", str(path)]


def _forged_win(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    return ["promote", str(_snapshot(tmp)), "--if-win"]


def _broken_yaml_in_config_dir(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    conf = tmp / "myconf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "broken.yaml").write_text("route: sim/small\n  bad: [unclosed\n", encoding="utf-8")
    return ["compile", "--config-dir", str(conf), "model=broken"]


def _not_utf8_in_config_dir(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    conf = tmp / "myconf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "latin1.yaml").write_bytes("route: sim/small\nrevision: caf\xe9\n".encode("latin-1"))
    return ["compile", "--config-dir", str(conf), "model=latin1"]


def _self_including_defaults(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    conf = tmp / "myconf"
    (conf / "agent").mkdir(parents=True)
    (conf / "agent" / "loop.yaml").write_text("defaults:\n  - loop\n  - _self_\nname: a\n", encoding="utf-8")
    return ["compile", "--config-dir", str(conf), "agent=loop"]


def _plugin_raising_ctrl_c(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp / "plug").mkdir()
    (tmp / "plug" / "ctrlc_plugin.py").write_text("raise KeyboardInterrupt\n", encoding="utf-8")
    mp.syspath_prepend(str(tmp / "plug"))
    return ["compile", "+plugins=[ctrlc_plugin]"]


def _deep_tasks_file(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    deep = "[" * 100_000 + "]" * 100_000
    (tmp / "deep.jsonl").write_text('{"id": "t1", "data": ' + deep + "}\n", encoding="utf-8")
    conf = tmp / "myconf"
    (conf / "workload").mkdir(parents=True)
    (conf / "workload" / "deep.yaml").write_text(
        f"defaults:\n  - workload_schema\n  - _self_\nname: tasks\noptions:\n  path: {tmp / 'deep.jsonl'}\n", encoding="utf-8")
    return ["evaluate", "--config-dir", str(conf), "workload=deep"]


def _registry_dir(*argv: str) -> Setup:
    def setup(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:  # runs_dir given, so the corpus's own registry_dir is not
        return [*argv, f"runs_dir={tmp / 'runs'}"]
    setup.__name__ = "_registry_dir_" + "_".join(a.partition("=")[0] for a in argv)
    return setup


def _unsafe_template_in_config_dir(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    conf = tmp / "myconf"
    (conf / "templates").mkdir(parents=True)
    (conf / "templates" / "evil.md.j2").write_text("{{ cycler.__init__.__globals__ }}\n", encoding="utf-8")
    return ["compile", "--config-dir", str(conf), "agent.template=evil.md.j2"]


SETUPS: list[tuple[Setup, str]] = [
    (_unsafe_template_in_config_dir, "templates/evil.md.j2' reaches outside its variables"),
    # the registry folder, named when it cannot be one, before anything is paid for
    (_registry_dir("compile", "registry_dir=/etc/passwd"), "registry_dir: '/etc/passwd' is under /etc/passwd, which is a file"),
    (_registry_dir("search", "registry_dir=/proc/evoharness"), "registry_dir: '/proc/evoharness' cannot be written"),
    (_registry_dir("snapshot", "registry_dir=/proc/evoharness"), "registry_dir: '/proc/evoharness' cannot be written"),
    (_registry_dir("evaluate", "workload.split=holdout", "unseal_holdout=true", "registry_dir=/proc/evoharness"),
     "registry_dir: '/proc/evoharness' cannot be written"),
    # no registry, nowhere to journal a holdout look: refused rather than looked at uncounted
    (_registry_dir("search", "registry_dir=''"), "registry_dir: is empty, and a search stores its champion and journals its holdout look"),
    (_registry_dir("evaluate", "workload.split=holdout", "unseal_holdout=true", "registry_dir=''"),
     "registry_dir: is empty, and a look at the holdout is recorded in the registry"),
    (_not_utf8_in_config_dir, "latin1.yaml: not UTF-8 text"),
    (_self_including_defaults, "the defaults lists include each other in a loop"),
    (_plugin_raising_ctrl_c, "plugins[0]: cannot import plugin 'ctrlc_plugin' (KeyboardInterrupt"),
    (_deep_tasks_file, "deep.jsonl line 1: nested deeper than a tasks file can be read"),
    (_summary_of_wrong_shape, "is not a search summary this report can render"),
    (_summary_not_json, "cannot read search summary"),
    (_busy_port, "Address already in use"),
    (_storage_not_a_database, "file is not a database"),
    (_tampered_snapshot, "was modified after it was written"),
    (_forged_win, "--if-win"),
    (_broken_yaml_in_config_dir, "broken.yaml: line 2, column 6"),
]


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def run_main(argv: list[str]) -> Any:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse-based commands exit from inside
        return exc.code


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    registry = tmp_path / "registry"
    registry.mkdir(exist_ok=True)
    before = files(tmp_path)
    hydra = argv[0] in ("compile", "evaluate", "search")
    own_runs = any(a.startswith("runs_dir=") for a in argv)
    extra = [f"runs_dir={tmp_path / 'runs'}", f"registry_dir={registry}"] if hydra and not own_runs else []
    assert run_main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert expected in err, err
    assert files(tmp_path) == before  # no runs/, no Hydra output dir, no registry file


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: str) -> None:
    monkeypatch.chdir(tmp_path)  # a default runs/ would land here
    check(tmp_path, capsys, argv, expected)


@pytest.mark.parametrize("setup, expected", SETUPS, ids=[f.__name__.strip("_") for f, _ in SETUPS])
def test_bad_files_are_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, setup: Setup, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        check(tmp_path, capsys, setup(tmp_path, monkeypatch), expected)
    finally:
        while _held:
            _held.pop().close()


def test_the_corpus_covers_every_command() -> None:
    commands = {a[0] for a, _ in CASES}
    assert commands >= {"compile", "evaluate", "search", "promote", "versions", "rollback", "report", "serve-sim"}
    assert len(CASES) + len(SETUPS) >= 80


def test_a_setting_the_command_never_reads_may_name_a_variable_this_machine_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The finite-number check reads every setting it can resolve; one it cannot (a database URL from a
    variable only the search's machine has) is left to the command that reads it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVOHARNESS_UNSET_VAR", raising=False)
    config = tmp_path / "myconf"
    (config / "search").mkdir(parents=True)
    (config / "search" / "shared.yaml").write_text(
        "defaults:\n  - default\n  - _self_\nstorage: ${oc.env:EVOHARNESS_UNSET_VAR}\n", encoding="utf-8")
    assert run_main(["compile", "--config-dir", str(config), "search=shared", "runs_dir=runs"]) == 0
