"""Secrets by value: what the config reads from the environment is scrubbed from every file, log
record and error, whatever its shape; snapshots carry the interpolation and never resolve one they
bring themselves."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from evoharness.compiler import secrets
from evoharness.compiler.atomic import write_json_atomic, write_text_atomic
from evoharness.compiler.errors import ConfigError
from evoharness.compiler.release.merge import inert
from evoharness.compiler.scrubbing import scrub_files

PLAIN = "Zq8rT5vW2xY7bN4mK9pL3sD6fG1hJ0aQwErTyUiO"  # 40 characters, no known key shape
SHAPED = "sk-proj-abcdefghijklmnopqrstuvwx0123456789"


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_KNOWN", {})
    monkeypatch.setattr(secrets, "_READ", set())
    monkeypatch.setenv("PLAIN_VALUE", PLAIN)
    monkeypatch.setenv("ROUTE_KEY", SHAPED)


def test_remember_config_reads_api_key_env_and_env_interpolations() -> None:
    cfg = OmegaConf.create({"model": {"api_key_env": "ROUTE_KEY"}, "agent": {"prompt_sections": {"role": "x ${oc.env:PLAIN_VALUE}"}}})
    secrets.remember_config(cfg)
    text = f"key {SHAPED} and {PLAIN} and {json.dumps(PLAIN + chr(34))}"
    out = secrets.scrub(text)
    assert SHAPED not in out and PLAIN not in out
    assert "${oc.env:ROUTE_KEY}" in out and "${oc.env:PLAIN_VALUE}" in out


def test_values_the_config_does_not_read_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SETTING", "an ordinary value of length")
    secrets.remember_config(OmegaConf.create({"model": {"route": "sim/small"}}))
    assert secrets.scrub("an ordinary value of length") == "an ordinary value of length"


def test_credential_named_variables_are_remembered_even_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", PLAIN)
    secrets.remember_config(OmegaConf.create({}))
    assert secrets.scrub(PLAIN) == "${oc.env:MY_SERVICE_TOKEN}"


def test_short_values_are_not_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY", "abc")
    secrets.remember_env("TINY")
    assert secrets.scrub("abc") == "abc"  # three letters would scrub ordinary words


def test_every_file_write_is_scrubbed(tmp_path: Path) -> None:
    secrets.remember_env("PLAIN_VALUE")
    write_text_atomic(tmp_path / "a.txt", f"value={PLAIN}\n")
    write_json_atomic(tmp_path / "b.json", {"nested": [PLAIN]})
    for f in ("a.txt", "b.json"):
        assert PLAIN not in (tmp_path / f).read_text(encoding="utf-8")


def test_log_records_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    secrets.remember_env("PLAIN_VALUE")
    secrets.install_log_scrubber()
    with caplog.at_level(logging.INFO):
        logging.getLogger("anything.at.all").info("calling with %s", PLAIN)
    assert caplog.records and PLAIN not in caplog.text and "${oc.env:PLAIN_VALUE}" in caplog.text


def test_scrub_files_rewrites_hydra_outputs_in_place(tmp_path: Path) -> None:
    secrets.remember_env("PLAIN_VALUE")
    (tmp_path / "overrides.yaml").write_text(f"- agent.vars.x={PLAIN}\n", encoding="utf-8")
    (tmp_path / "clean.yaml").write_text("- seed=1\n", encoding="utf-8")
    scrub_files(tmp_path)
    assert PLAIN not in (tmp_path / "overrides.yaml").read_text(encoding="utf-8")
    assert (tmp_path / "clean.yaml").read_text(encoding="utf-8") == "- seed=1\n"


def test_restore_puts_back_only_what_this_process_read() -> None:
    secrets.remember_env("PLAIN_VALUE")
    data = {"a": "x ${oc.env:PLAIN_VALUE}", "b": ["${oc.env:HOME}"]}
    assert secrets.restore(data) == {"a": f"x {PLAIN}", "b": ["${oc.env:HOME}"]}


def test_snapshot_interpolations_never_resolve_unless_the_config_reads_them() -> None:
    secrets.remember_env("PLAIN_VALUE")
    foreign: set[str] = set()
    node = OmegaConf.create({"v": inert({"a": "leak ${oc.env:HOME}", "b": "${oc.env:PLAIN_VALUE}", "c": "${seed}", "d": "a\\${x}"},
                                        foreign)})
    resolved = OmegaConf.to_container(node, resolve=True)["v"]  # type: ignore[index]
    assert resolved == {"a": "leak ${oc.env:HOME}", "b": PLAIN, "c": "${seed}", "d": "a\\${x}"}
    assert foreign == {"HOME"}


def test_error_lines_are_scrubbed() -> None:
    secrets.remember_env("PLAIN_VALUE")
    err = ConfigError("model.api_base", f"bad value {PLAIN}", "fix it")
    assert PLAIN not in secrets.scrub(str(err))


@pytest.mark.parametrize("key, credential", [
    ("model.input_cost_per_token", False), ("output_cost_per_token", False), ("max_tokens", False), ("token_budget", False),
    ("access_token", True), ("hfToken", True), ("model.extra.api_key", True), ("Authorization", True), ("db_password", True),
])
def test_price_and_count_fields_are_not_credentials(key: str, credential: bool) -> None:
    # a price on the command line is a number in a string; a key-named field with any text is refused
    assert (secrets.find_secret({key: "1e-7"}) is not None) is credential


def test_restore_fills_only_variables_the_config_interpolates(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key's variable is remembered to be scrubbed, never to be filled back in: text shaped like its
    marker (a snapshot's, a mutator's) stays text in a job's spec."""
    cfg = OmegaConf.create({"model": {"api_key_env": "ROUTE_KEY"}, "agent": {"vars": {"v": "${oc.env:PLAIN_VALUE}"}}})
    secrets.remember_config(cfg)
    restored = secrets.restore({"a": "key ${oc.env:ROUTE_KEY}", "b": "value ${oc.env:PLAIN_VALUE}"})
    assert restored == {"a": "key ${oc.env:ROUTE_KEY}", "b": f"value {PLAIN}"}
