"""The Python API does what the CLI does: the same composition, checks, records and answer, from a
script and from inside a running event loop (a notebook's cell). Each case runs in its own
interpreter, as a user's script or kernel would, on the refunds example workload."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.hydra_errors import UsageError

pytestmark = pytest.mark.slow  # whole searches or servers: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
REFUNDS = ROOT / "examples" / "refunds"
SHOP = ["plugins=[refunds_shop]", "workload=refunds", "agent=refunds_agent", "tool=refunds"]
TINY_SEARCH = [*SHOP, "hydra/launcher=basic", "model=sim_small", "search.models=[sim_large]", "criteria.decision=best_quality",
               "search.rounds=1", "search.population_size=2", "search.trials_per_round=2", "model.temperature=1.0",
               "search.samples=1", "search.max_front_dev=2", "search.resamples=200", "mutators.enabled=[]", "search.teacher=null",
               "search.formats=[json]", "search.temperatures=[0.0]", "search.study=api"]


def _env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REFUNDS)}


def _script(folder: Path, body: str) -> subprocess.CompletedProcess[str]:
    path = folder / "notebook.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], cwd=folder, env=_env(), capture_output=True, text=True, timeout=600)


def test_evaluate_runs_inside_a_running_event_loop_and_writes_what_the_cli_writes(tmp_path: Path) -> None:
    args = [*SHOP, "workload.split=dev", "workload.limit=3", "workload.samples=1", f"runs_dir={tmp_path / 'runs'}", "cache_dir=null"]
    proc = _script(tmp_path, f"""
        import asyncio, json
        import evoharness

        async def cell():
            # the way a notebook runs it: the kernel's loop is running
            awaited = await evoharness.evaluate_async({args!r})
            blocking = evoharness.evaluate({args!r})  # a plain call inside the running loop
            return awaited, blocking

        awaited, blocking = asyncio.run(cell())
        print(json.dumps({{"types": [type(awaited).__name__, type(blocking).__name__],
                           "pass_rate": [awaited.metrics["pass_rate"], blocking.metrics["pass_rate"]],
                           "tasks": len(awaited.to_dict()["tasks"])}}))
        """)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["types"] == ["EvalReport", "EvalReport"]
    assert out["tasks"] == 3
    assert out["pass_rate"][0] == out["pass_rate"][1]
    records = sorted((tmp_path / "runs").rglob("eval.json"))
    assert len(records) == 2, records  # each call wrote its record where the CLI writes it
    cli = subprocess.run([sys.executable, "-m", "evoharness", "evaluate", *args], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr
    written = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs").rglob("eval.json"))]
    assert len(written) == 3
    assert len({w["variant_hash"] for w in written}) == 1
    assert len({json.dumps(w["metrics"]["pass_rate"]) for w in written}) == 1


def test_a_bad_value_raises_config_error_naming_it_before_anything_runs(tmp_path: Path) -> None:
    proc = _script(tmp_path, f"""
        import evoharness
        from evoharness.plugin import ConfigError
        try:
            evoharness.evaluate({{"workload.samples": 0, "runs_dir": {str(tmp_path / 'runs')!r}}})
        except ConfigError as exc:
            print("refused:", exc)
        """)
    assert proc.returncode == 0, proc.stderr
    assert "refused: workload.samples: must be at least 1, got 0" in proc.stdout
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("eval.json"))


def test_compile_takes_a_mapping_and_a_composed_config_and_gives_the_clis_hash(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = _script(tmp_path, f"""
        import json
        import evoharness
        from hydra import compose, initialize_config_module

        by_list = evoharness.compile(["model=sim_small", "model.temperature=0.5", "runs_dir={runs}"])
        by_map = evoharness.compile({{"model": "sim_small", "model.temperature": 0.5, "runs_dir": "{runs}"}})
        with initialize_config_module(config_module="evoharness.conf", version_base=None):
            cfg = compose(config_name="config", overrides=["model=sim_small", "model.temperature=0.5", "runs_dir={runs}"])
        by_cfg = evoharness.compile(cfg)
        print(json.dumps([by_list.content_hash, by_map.content_hash, by_cfg.content_hash]))
        """)
    assert proc.returncode == 0, proc.stderr
    hashes = json.loads(proc.stdout.strip().splitlines()[-1])
    cli = subprocess.run([sys.executable, "-m", "evoharness", "compile", "model=sim_small", "model.temperature=0.5", f"runs_dir={runs}"],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert hashes == [cli.stdout.split()[0]] * 3
    # each call (and the CLI's) ran in a folder of its own, though they started within a second
    assert len([d for d in (runs / "compile").iterdir() if d.is_dir()]) == 4


def test_search_returns_the_outcome_whose_champion_is_the_clis(tmp_path: Path) -> None:
    api_runs, cli_runs = tmp_path / "api", tmp_path / "cli"
    args = [*TINY_SEARCH, "seed=3"]
    proc = _script(tmp_path, f"""
        import json
        import evoharness
        outcome = evoharness.search({[*args, f"runs_dir={api_runs}", f"registry_dir={api_runs / 'registry'}"]!r})
        print(json.dumps({{"type": type(outcome).__name__, "champion": outcome.champion.variant_hash,
                           "baseline": outcome.baseline.variant_hash, "verdict": outcome.claim.verdict,
                           "front": sorted(m.variant_hash for m in outcome.front)}}))
        """)
    assert proc.returncode == 0, proc.stderr
    api = json.loads(proc.stdout.strip().splitlines()[-1])
    cli = subprocess.run([sys.executable, "-m", "evoharness", "search", *args, f"runs_dir={cli_runs}",
                          f"registry_dir={cli_runs / 'registry'}"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=900)
    assert cli.returncode == 0, cli.stderr
    summary = json.loads((cli_runs / "api" / "summary.json").read_text())
    assert api["type"] == "SearchOutcome"
    assert api["champion"] != api["baseline"]  # the large model beats the small incumbent: a champion to compare
    assert api["verdict"] == summary["claim"]["verdict"]
    assert api["champion"] == summary["champion"]["variant_hash"]
    assert api["front"] == sorted(m["variant_hash"] for m in summary["front"])


def test_calls_from_two_threads_each_get_their_own_config(tmp_path: Path) -> None:
    """Hydra's state is process-wide: two threads' calls must not compose each other's overrides."""
    proc = _script(tmp_path, f"""
        import json, threading
        import evoharness

        got = []
        def work(model):
            for _ in range(3):
                got.append((model, evoharness.compile([f"model={{model}}", "runs_dir={tmp_path / 'runs'}"]).model.route))
        threads = [threading.Thread(target=work, args=(m,)) for m in ("sim_small", "sim_large")]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(json.dumps(got))
        """)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(got) == 6
    assert all(route == f"sim/{model.removeprefix('sim_')}" for model, route in got), got


def test_a_string_is_refused_with_the_fix() -> None:
    import evoharness

    with pytest.raises(TypeError, match=r"got str 'model=sim_small'. Fix: pass a list, e.g. \['model=sim_small'\]"):
        evoharness.compile("model=sim_small")  # type: ignore[arg-type]


def test_an_interrupt_inside_a_running_loop_asks_the_search_on_the_worker_thread_to_stop(tmp_path: Path) -> None:
    """A notebook's stop button is a SIGINT to the kernel's main thread, which waits on the worker
    thread a search runs on: the search is asked to stop after its batch, as a first Ctrl-C does."""
    proc = _script(tmp_path, """
        import asyncio, os, signal, sys, threading, time
        from evoharness.api import _loop_safe
        from evoharness.search.optimise.sweeper import StopRequest

        running = threading.Event()

        def search_like():
            with StopRequest() as stop:  # what the sweeper holds while its rounds run
                running.set()
                # longer than the stop button may wait to press (120 s + 120 s on a loaded machine):
                # the loop ends as soon as the stop is heard, so the margin costs nothing when it is
                deadline = time.monotonic() + 300
                while not stop.requested and time.monotonic() < deadline:
                    time.sleep(0.01)
                return "stopped after its batch" if stop.requested else "ran to the end"

        def waiting_on_the_search():
            frame, names = sys._current_frames().get(threading.main_thread().ident), []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            return "_loop_safe" in names and "_waited" in names

        def stop_button():
            # pressed once the search runs and the kernel's thread waits on it, however late a loaded
            # machine gets both there: an interrupt before that is another case than this test's
            assert running.wait(120), "the search never started on the worker thread"
            deadline = time.monotonic() + 120
            while not waiting_on_the_search():
                assert time.monotonic() < deadline, "the main thread never waited on the search"
                time.sleep(0.01)
            # a process-wide signal goes to whichever thread the OS picks; this one, not the main
            # thread, is the case a blocked wait would miss until the search ended
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

        async def cell():
            threading.Thread(target=stop_button, daemon=True).start()
            return _loop_safe(search_like)

        # a kernel's loop, as ipykernel runs it: SIGINT stays Python's KeyboardInterrupt (asyncio.run
        # would install a handler of its own). Set here, not inherited: a suite started as a background
        # job of a non-interactive shell (nohup, `cmd &`) hands its children SIGINT ignored, and Python
        # then installs no handler at all
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(asyncio.new_event_loop().run_until_complete(cell()))
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "stopped after its batch"
    assert "stopping after the batch in flight" in proc.stderr


def test_search_stays_callable_once_the_search_package_is_imported() -> None:
    import evoharness
    import evoharness.search.optimise.run  # noqa: F401  (binds evoharness.search to the package)
    from evoharness.api import search

    assert callable(evoharness.search)
    assert evoharness.search.optimise.run.SearchRun is not None  # and it is still the package
    with pytest.raises(UsageError, match="override key 'a b'"):
        evoharness.search({"a b": 1})
    assert search.__doc__ and "summary.json" in search.__doc__


@pytest.mark.parametrize(("overrides", "error", "message"), [
    (None, TypeError, "got NoneType None. Fix: pass a list"),
    (b"model=x", TypeError, "got bytes"),
    (["-m", "model=sim_small"], "UsageError", "takes overrides only"),
    ({"": 1}, "UsageError", "override key '' is not a dotted config path"),
    ({"model.temperature": object()}, TypeError, "Fix: pass text, a number"),
])
def test_bad_overrides_are_refused_naming_them(overrides: Any, error: Any, message: str) -> None:
    import evoharness

    with pytest.raises(UsageError if error == "UsageError" else error, match=re.escape(message)):
        evoharness.compile(overrides)


@pytest.mark.parametrize("text", ["a,b", "${oc.env:HOME}", r"\${x}", r"regex \d+ in C:\orders", "it's", "ends with \\", r"q\\'x", "",
                                  "null", "line\nbreak", "{{ '{' }}"])
def test_a_mapping_value_is_literal_text(text: str) -> None:
    """What the user wrote is what the config holds: no sweep, no interpolation, no doubled backslash."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from evoharness.api import as_overrides

    (override,) = as_overrides({"agent.prompt_sections.style": text})
    parsed = OverridesParser.create().parse_overrides([override])[0]
    assert not parsed.is_sweep_override()
    assert OmegaConf.create({"v": parsed.value()}).v == text


@pytest.mark.parametrize("overrides", [
    {"model.temperature": "plainkey0123456789abcdef"},  # refused by the preflight
    {"a b plainkey0123456789abcdef": 1},  # refused before it, as a key
    ["--plainkey0123456789abcdef"],  # as a flag
    "model=plainkey0123456789abcdef",  # as the wrong kind of argument
])
def test_an_api_error_carries_no_secret_value(overrides: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evoharness

    monkeypatch.setenv("ACME_API_KEY", "plainkey0123456789abcdef")
    with pytest.raises((UsageError, TypeError)) as caught:
        evoharness.compile(overrides)
    assert "plainkey0123456789abcdef" not in str(caught.value) and "${oc.env:ACME_API_KEY}" in str(caught.value)


def test_a_dotted_path_through_evoharness_search_resolves_in_a_fresh_process(tmp_path: Path) -> None:
    """Hydra's _target_ strings and monkeypatch walk attributes: evoharness.search is the package."""
    proc = _script(tmp_path, """
        from hydra.utils import get_object
        import evoharness
        print(get_object("evoharness.search.records.sweep.SweepSummary").__name__, callable(evoharness.search))
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["SweepSummary", "True"]


def test_a_call_made_while_one_runs_in_the_same_thread_is_refused(tmp_path: Path) -> None:
    """A callback or a tool that calls the API from inside a call would wait on itself for ever."""
    from evoharness import api

    def nested() -> object:
        return api.compile([f"runs_dir={tmp_path}"])

    with pytest.raises(RuntimeError, match="was called while evoharness.evaluate was running"):
        api._locked("evaluate", nested)


def test_a_search_refused_inside_the_sweep_raises_the_config_error_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line prints it and exits 2; a Python caller gets the ConfigError to catch."""
    import evoharness
    from evoharness.compiler.errors import ConfigError
    from evoharness.search.optimise.lock import study_lock

    monkeypatch.syspath_prepend(str(REFUNDS))
    runs = tmp_path / "runs"
    with study_lock(runs / "api", "api"), pytest.raises(ConfigError, match=r"search.study: study 'api' is being searched by"):
        evoharness.search([*TINY_SEARCH, f"runs_dir={runs}", f"registry_dir={runs / 'registry'}"])
    assert not (runs / "api" / "summary.json").exists()
