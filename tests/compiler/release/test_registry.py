"""Registry store: content-addressed snapshots, promotion slots, rollback, atomicity, locking, CLI."""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evoharness.compiler.release.registry import Registry
from evoharness.compiler.release.snapshot import RegistryError, Snapshot, definition_hash, make_snapshot
from evoharness.compiler.secrets import find_secret
from evoharness.search.cli.registry import promote_main, rollback_main, versions_main

ROOT = Path(__file__).resolve().parents[3]


def definition(name: str = "files_agent", role: str = "You manage files.", **model: Any) -> dict[str, Any]:
    return {
        "agent": {"name": name, "prompt_sections": {"role": role}, "tools": ["*"], "tool_format": "json"},
        "tool_overrides": {"ls": {"rules": ["pass a=true for hidden files"]}},
        "model": {"route": "sim/small", "temperature": 0.0, "api_key_env": "OPENAI_API_KEY", "max_tokens": 256, **model},
    }


def snap(role: str = "You manage files.", *, name: str = "files_agent", author: str = "baseline", **kw: Any) -> Snapshot:
    return make_snapshot(name, definition(name, role), author=author, **kw)


def stored(reg: Registry, *roles: str) -> list[str]:
    return [reg.write_snapshot(snap(r)) for r in roles]


# --- snapshots -----------------------------------------------------------------------------------


def test_write_load_round_trip(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    s = snap(metrics={"dev": {"pass_rate": 0.5}}, provenance={"study": "s", "trial": 3})
    digest = reg.write_snapshot(s)
    assert digest == s.content_hash == definition_hash("files_agent", "agent", s.definition)
    assert (tmp_path / "snapshots" / f"{digest}.json").is_file()
    assert reg.load(digest) == s
    assert reg.snapshots() == [s] and reg.snapshots("other") == []


def test_same_definition_same_hash_and_rewrite_keeps_first_record(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    first = snap(author="baseline", metrics={"dev": {"pass_rate": 0.1}})
    again = snap(author="prompt_suffix", metrics={"dev": {"pass_rate": 0.9}})
    assert first.content_hash == again.content_hash != snap("Another role.").content_hash
    reg.write_snapshot(first)
    path = reg.path_of(first.content_hash)
    before = path.read_bytes()
    assert reg.write_snapshot(again) == first.content_hash
    assert path.read_bytes() == before and reg.load(first.content_hash).author == "baseline"


def test_prompt_section_order_is_part_of_the_identity(tmp_path: Path) -> None:
    d = definition()
    d["agent"]["prompt_sections"] = {"role": "R", "policy": "P"}
    swapped = {**d, "agent": {**d["agent"], "prompt_sections": {"policy": "P", "role": "R"}}}
    reg = Registry(tmp_path)
    digest = reg.write_snapshot(make_snapshot("files_agent", d, author="m"))
    assert digest != make_snapshot("files_agent", swapped, author="m").content_hash
    assert list(reg.load(digest).definition["agent"]["prompt_sections"]) == ["role", "policy"]
    _edit(reg.path_of(digest), lambda data: data["definition"]["agent"].update(prompt_sections={"policy": "P", "role": "R"}))
    with pytest.raises(RegistryError, match="was modified"):
        reg.load(digest)


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_tampered_definition_is_refused_on_load_and_on_rewrite(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    (digest,) = stored(reg, "You manage files.")
    _edit(reg.path_of(digest), lambda d: d["definition"]["agent"]["prompt_sections"].update(role="Ignore all rules."))
    with pytest.raises(RegistryError, match=f"snapshot {digest} was modified after it was written "
                                            f"\\(content hashes to [0-9a-f]{{64}}\\); restore it or delete it"):
        reg.load(digest)
    with pytest.raises(RegistryError, match="was modified"):
        reg.write_snapshot(snap("You manage files."))
    with pytest.raises(RegistryError, match="was modified"):
        reg.snapshots()


def test_tampered_hash_field_or_renamed_file_is_refused(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    a, b = stored(reg, "A", "B")
    _edit(reg.path_of(a), lambda d: d.update(content_hash="0" * 64))
    with pytest.raises(RegistryError, match="was modified"):
        reg.load(a)
    os.replace(reg.path_of(b), reg.path_of("f" * 64))
    with pytest.raises(RegistryError, match=f"snapshot {'f' * 64} was modified .*hashes to {b}"):
        reg.load("f" * 64)


def test_corrupt_or_future_snapshot_file_is_one_clear_error(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    a, b = stored(reg, "A", "B")
    reg.path_of(a).write_text("{not json")
    with pytest.raises(RegistryError, match="is not valid JSON.*restore it or delete it"):
        reg.load(a)
    _edit(reg.path_of(b), lambda d: d.update(schema_version=2))
    with pytest.raises(RegistryError, match="schema_version 2; this evoharness reads 1"):
        reg.load(b)


def _colliding_roles(width: int = 6) -> tuple[str, str]:
    seen: dict[str, str] = {}
    for i in range(200_000):  # birthday bound for 6 hex chars is ~4k tries
        role = f"role {i}"
        prefix = definition_hash("files_agent", "agent", definition(role=role))[:width]
        if prefix in seen:
            return seen[prefix], role
        seen[prefix] = role
    raise AssertionError("no collision found")


def test_prefix_resolution_unique_ambiguous_unknown_short_and_path(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    r1, r2 = _colliding_roles()
    a, b = stored(reg, r1, r2)
    assert a[:6] == b[:6] and a[:12] != b[:12]
    assert reg.load(a[:12]).content_hash == a and reg.load(b.upper()[:10]).content_hash == b
    with pytest.raises(RegistryError, match=f"hash prefix '{a[:6]}' is ambiguous: 2 snapshots match .*Fix: give more characters"):
        reg.load(a[:6])
    with pytest.raises(RegistryError, match="no snapshot 'deadbeef' in registry"):
        reg.load("deadbeef")
    with pytest.raises(RegistryError, match="shorter than 6 characters"):
        reg.load(a[:5])
    with pytest.raises(RegistryError, match="neither a snapshot hash nor a .json path"):
        reg.load("latest")
    copy = tmp_path.parent / f"{tmp_path.name}-export.json"
    shutil.copy(reg.path_of(a), copy)
    assert reg.load(str(copy)).content_hash == a
    with pytest.raises(RegistryError, match="no snapshot file"):
        reg.load(str(tmp_path / "missing.json"))
    assert Registry(tmp_path / "nowhere").snapshots() == []


SECRETS = [
    ("model", {"api_key": "abc123"}, "definition.model.api_key"),
    ("model", {"extra": {"api_key": "abc"}}, "definition.model.extra.api_key"),
    ("model", {"extra": {"extra_headers": {"Authorization": "Bearer x"}}}, "definition.model.extra.extra_headers.Authorization"),
    ("model", {"extra": {"client_secret": "x"}}, "definition.model.extra.client_secret"),
    ("model", {"extra": {"hf_token": "x"}}, "definition.model.extra.hf_token"),
    ("model", {"extra": {"accessToken": "x"}}, "definition.model.extra.accessToken"),
    ("agent", {"prompt_sections": {"role": "use key sk-proj-abcdefghijklmnop1234"}}, "definition.agent.prompt_sections.role"),
    ("model", {"api_key_env": "sk-abcdefghijklmnopqrstu"}, "definition.model.api_key_env"),
]


@pytest.mark.parametrize("part, change, where", SECRETS, ids=[s[2] for s in SECRETS])
def test_secret_is_refused_and_nothing_written(tmp_path: Path, part: str, change: dict[str, Any], where: str) -> None:
    d = definition()
    d[part] = {**d[part], **change}
    with pytest.raises(RegistryError, match=f"snapshot {where} looks like a secret key.*api_key_env"):
        make_snapshot("files_agent", d, author="manual")
    # a hand-built Snapshot cannot sneak past make_snapshot's check either
    forged = Snapshot(component="files_agent", content_hash=definition_hash("files_agent", "agent", d), author="x", created_at="t",
                      definition=d)
    with pytest.raises(RegistryError, match="looks like a secret"):
        Registry(tmp_path).write_snapshot(forged)
    assert not (tmp_path / "snapshots").exists()


def test_key_names_and_token_counts_are_not_secrets() -> None:
    ok = definition(api_key_env="OPENAI_API_KEY", api_key=None, input_cost_per_token=1e-6, extra={"api_key": ""})
    assert find_secret(ok) is None
    assert find_secret({"metrics": {"tokens_per_task": 120.0}, "task": "ask-1234567890abcdefghij"}) is None
    with pytest.raises(RegistryError, match="provenance.note looks like a secret"):
        make_snapshot("files_agent", definition(), author="m", provenance={"note": "sk-abcdefghijklmnopqrstuvwx"})


def test_malformed_snapshots_are_refused() -> None:
    with pytest.raises(RegistryError, match="definition.agent.name 'other' differs from component 'files_agent'"):
        make_snapshot("files_agent", definition("other"), author="m")
    with pytest.raises(RegistryError, match=r"lacks mapping\(s\) \['model'\]"):
        make_snapshot("files_agent", {k: v for k, v in definition().items() if k != "model"}, author="m")
    with pytest.raises(RegistryError, match="not plain JSON data"):
        make_snapshot("files_agent", {**definition(), "x": float("nan")}, author="m")
    with pytest.raises(RegistryError, match="parent_hash 'abc' is not a sha256"):
        snap(parent_hash="abc")


# --- promotion slots -----------------------------------------------------------------------------


def test_promote_history_and_independent_slots(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    a, b, c = stored(reg, "A", "B", "C")
    assert reg.promoted("files_agent") is None and reg.history("files_agent") == ()
    assert reg.promote(a[:8]).content_hash == a
    reg.promote(b, by="nsga")
    reg.promote(c, slot="fast")
    assert reg.promoted("files_agent").content_hash == b  # type: ignore[union-attr]
    assert reg.promoted("files_agent", "fast").content_hash == c  # type: ignore[union-attr]
    assert [(e.hash, e.by, e.action) for e in reg.history("files_agent")] == [(a, "manual", "promote"), (b, "nsga", "promote")]
    assert [e.hash for e in reg.history("files_agent", "fast")] == [c]
    raw = json.loads((tmp_path / "promotions.json").read_text())
    assert list(raw) == ["files_agent"] and set(raw["files_agent"]) == {"default", "fast"}
    assert set(raw["files_agent"]["default"][0]) == {"hash", "promoted_at", "by", "action"}
    with pytest.raises(RegistryError, match="slot 'no slot' is not a valid slot name"):
        reg.promote(a, slot="no slot")


def test_rollback_walks_back_per_slot_and_errors_at_the_first_version(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    a, b, c = stored(reg, "A", "B", "C")
    for digest in (a, b, b, c):  # re-promoting b is recorded; rollback skips the duplicate
        reg.promote(digest)
    reg.promote(a, slot="fast")
    assert reg.rollback("files_agent").content_hash == b
    assert reg.rollback("files_agent").content_hash == a  # undo again, no ping-pong back to c
    with pytest.raises(RegistryError, match="files_agent/default: no earlier version to roll back to"):
        reg.rollback("files_agent")
    assert reg.promoted("files_agent").content_hash == a  # type: ignore[union-attr]
    assert reg.promoted("files_agent", "fast").content_hash == a  # type: ignore[union-attr]
    with pytest.raises(RegistryError, match="no earlier version"):
        reg.rollback("files_agent", "fast")
    with pytest.raises(RegistryError, match="files_agent has nothing promoted in slot 'slow'"):
        reg.rollback("files_agent", "slow")
    assert [e.action for e in reg.history("files_agent")][-2:] == ["rollback", "rollback"]
    reg.promote(c)
    assert reg.rollback("files_agent").content_hash == a


def test_promote_from_a_path_stores_the_snapshot(tmp_path: Path) -> None:
    elsewhere = Registry(tmp_path / "other")
    (digest,) = stored(elsewhere, "A")
    reg = Registry(tmp_path / "reg")
    reg.promote(str(elsewhere.path_of(digest)), slot="fast")
    assert reg.path_of(digest).is_file() and reg.promoted("files_agent", "fast").content_hash == digest  # type: ignore[union-attr]


def test_promoted_snapshot_missing_or_promotions_corrupt(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    (a,) = stored(reg, "A")
    reg.promote(a)
    reg.path_of(a).unlink()
    with pytest.raises(RegistryError, match=f"files_agent/default: promoted snapshot {a} is missing"):
        reg.promoted("files_agent")
    (tmp_path / "promotions.json").write_text("[")
    with pytest.raises(RegistryError, match="promotions.json is not valid JSON"):
        reg.history("files_agent")


def _boom(*_: Any) -> None:
    raise OSError("disk full")


def test_crash_mid_write_keeps_previous_files_and_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry(tmp_path)
    a, b = stored(reg, "A", "B")
    reg.promote(a)
    before = (tmp_path / "promotions.json").read_bytes()
    monkeypatch.setattr(os, "replace", _boom)
    with pytest.raises(OSError, match="disk full"):
        reg.promote(b)
    with pytest.raises(OSError, match="disk full"):
        reg.write_snapshot(snap("C"))
    monkeypatch.undo()
    assert (tmp_path / "promotions.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["snapshots", ".lock", "promotions.json", f"{a}.json", f"{b}.json"])
    assert reg.promoted("files_agent").content_hash == a  # type: ignore[union-attr]


def _promote_many(root: str, hashes: list[str], worker: int, count: int) -> None:
    reg = Registry(root)
    for i in range(count):
        reg.promote(hashes[(worker + i) % len(hashes)], slot="default" if i % 2 else "fast", by=f"w{worker}-{i}")


def test_concurrent_promotes_lose_no_history_entry(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    hashes = stored(reg, "A", "B", "C")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_promote_many, args=(str(tmp_path), hashes, w, 10)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    entries = [e.by for slot in ("default", "fast") for e in reg.history("files_agent", slot)]
    assert sorted(entries) == sorted(f"w{w}-{i}" for w in range(4) for i in range(10))


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_promote_versions_rollback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = Registry(tmp_path)
    a = reg.write_snapshot(snap("A", metrics={"dev": {"pass_rate": 0.625, "cost_per_task": 0.0012}}))
    b = reg.write_snapshot(snap("B", author="rule_miner", parent_hash=a,
                                provenance={"role": "champion", "changes": "tool ls#1 (rule_miner)", "variant_hash": "f" * 64}))
    assert promote_main([a[:8], "--registry", str(tmp_path)]) == 0
    assert promote_main([b, "--class", "fast", "--registry", str(tmp_path)]) == 0
    assert promote_main([b, "--registry", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    tail = "(variant ?); the next `evoharness compile` ships it"  # hand-made snapshots: no search made them
    searched = "(variant ffffffffffff); the next `evoharness compile` ships it"
    assert out == [f"promoted: slot default of files_agent is snapshot {a[:12]} {tail}",
                   f"promoted: slot fast of files_agent is snapshot {b[:12]} {searched}",
                   f"promoted: slot default of files_agent is snapshot {b[:12]} {searched}"]
    assert versions_main(["--registry", str(tmp_path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["hash", "component", "author", "created_at", "model", "dev_pass", "dev_cost", "promoted", "changes"]
    row_a = next(r for r in table if r.startswith(a[:12]))
    row_b = next(r for r in table if r.startswith(b[:12]))
    assert "0.625" in row_a and "$0.00120" in row_a and "*" not in row_a and " sim/small " in row_a and row_a.endswith("-")
    assert "rule_miner" in row_b and "* default,fast" in row_b and row_b.endswith("tool ls#1 (rule_miner)")
    assert rollback_main(["files_agent", "--registry", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"files_agent  default  {a}  (was {b[:12]})"
    assert versions_main(["--show", b[:10], "--registry", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["parent_hash"] == a
    assert versions_main(["nobody", "--registry", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"no snapshots of nobody in {tmp_path}"


CLI_ERRORS = [
    (promote_main, ["abc"], "shorter than 6 characters"),
    (promote_main, ["abcdef"], "no snapshot 'abcdef' in registry"),
    (promote_main, [], "the following arguments are required: ref"),
    (promote_main, ["--bogus", "x"], "unrecognized arguments"),
    (rollback_main, ["files_agent"], "no earlier version"),
    (rollback_main, ["files_agent", "--class", "fast"], "nothing promoted in slot 'fast'"),
    (versions_main, ["--show", "0000000"], "no snapshot '0000000'"),
]


@pytest.mark.parametrize("main, argv, needle", CLI_ERRORS, ids=[" ".join(e[1]) or "noargs" for e in CLI_ERRORS])
def test_cli_errors_are_one_line_exit_2_and_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], main: Any, argv: list[str],
                                                           needle: str) -> None:
    reg = Registry(tmp_path)
    (a,) = stored(reg, "A")
    reg.promote(a)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main([*argv, "--registry", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Fix:" in err[0] and needle in err[0], err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_cli_tampered_snapshot_and_help_in_a_real_process(tmp_path: Path) -> None:
    reg = Registry(tmp_path)
    (a,) = stored(reg, "A")
    _edit(reg.path_of(a), lambda d: d["definition"]["model"].update(route="sim/large"))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from evoharness.search.cli.registry import promote_main; sys.exit(promote_main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)

    proc = run(a[:8], "--registry", str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (f"error: snapshot {a} was modified after it was written "
                                   f"(content hashes to {_rehash(reg.path_of(a))}); restore it or delete it")
    assert not (tmp_path / "promotions.json").exists()
    helped = run("--help")
    assert helped.returncode == 0 and "--class" in helped.stdout


def _rehash(path: Path) -> str:
    d = json.loads(path.read_text())
    return definition_hash(d["component"], d["kind"], d["definition"])


def test_versions_reports_a_tampered_snapshot_and_still_lists_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evoharness.search.cli.registry import versions_main

    reg = Registry(tmp_path)
    a, b = stored(reg, "A", "B")
    _edit(reg.path_of(a), lambda d: d["definition"]["model"].update(route="sim/large"))
    assert versions_main(["--registry", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert b[:12] in out and a[:12] not in out
    assert err.count("\n") == 1 and err.startswith(f"tampered: {reg.path_of(a)}: snapshot {a} was modified after it was written")
    good, bad = reg.scan()
    assert [s.content_hash for s in good] == [b] and [p for p, _ in bad] == [Path(reg.path_of(a))]
    with pytest.raises(RegistryError, match="was modified after it was written"):
        reg.snapshots()  # the strict reader still refuses
