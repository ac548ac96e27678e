"""Hydra's and OmegaConf's multi-line errors as one line that names what was wrong and how to fix it."""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from evoharness.compiler.configpath import ConfigPath


class UsageError(Exception):
    """Bad command-line input that is not a config path (exit 2)."""


_NEEDS_QUOTES = re.compile(r"[{}\[\]()'\"\\:,$=\s]|[^\x00-\x7f]")


def parse_error(overrides: Sequence[str], first: str) -> str:
    """Name the override Hydra could not parse; a value with braces, quotes or non-ASCII text needs quoting."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for ov in overrides:
        try:
            OverridesParser.create().parse_overrides([ov])
        except Exception:
            key, _, value = ov.partition("=")
            if value and _NEEDS_QUOTES.search(value):
                return (f"{key}: cannot parse the value {value!r} ({first}). "
                        f"Fix: quote it for Hydra, e.g. \"{key}='{value}'\" (escape a ' inside as \\')")
            return f"bad override {ov!r}: {first}. Fix: write key=value (sweeps: key=a,b,c with -m)"
    return f"bad override: {first}. Fix: write key=value (sweeps: key=a,b,c with -m)"


def one_line_hydra_error(exc: BaseException, overrides: list[str], cp: ConfigPath | None = None) -> str:
    from hydra.errors import MissingConfigException

    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = str(exc.missing_cfg_file).rpartition("/")
        options = [o for o in (exc.options or []) if not o.endswith("_schema")]
        searched = ", ".join(str(d) for d in (cp or ConfigPath()).dirs())
        if not group:  # the primary config itself
            return (f"--config-name {option}: no primary config {option}.yaml in the config dirs searched ({searched}). "
                    "Fix: put it in your config dir and pass --config-dir DIR, or drop --config-name")
        return (f"{group}={option}: no such option in config group '{group}' (config dirs searched: {searched}). "
                f"Fix: use one of {options}, or add {group}/{option}.yaml to your own config dir and pass --config-dir DIR")
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, UnicodeDecodeError):  # Hydra does not say which file: find it
        bad = _undecodable_yaml(cp or ConfigPath())
        where = f"{bad}: " if bad else ""
        return (f"{where}not UTF-8 text (byte {cause.start}: {cause.reason}). "
                f"Fix: save {bad or 'the config file'} as UTF-8")
    if isinstance(cause, RecursionError):
        return ("the defaults lists include each other in a loop (a config's defaults name itself, directly or through "
                f"another file; config dirs: {', '.join(str(d) for d in (cp or ConfigPath()).dirs())}). "
                "Fix: remove the entry that leads back to the file it is in")
    mark = getattr(cause, "problem_mark", None)
    if mark is not None:  # a YAML syntax error: name the file and line
        problem = str(getattr(cause, "problem", None) or str(cause).splitlines()[0])
        return (f"{mark.name}: line {mark.line + 1}, column {mark.column + 1}: {problem} (not valid YAML). "
                f"Fix: correct the YAML in {mark.name}")
    lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
    full_key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), "")
    head = lines[0] if lines else type(cause).__name__
    where = f"{full_key}: " if full_key else ""
    if "is not in struct" in head and full_key:
        named = re.match(r"Key '(.+)' is not in struct", head)  # the key as written, which may hold dots itself
        if named and full_key.endswith("." + named.group(1)):
            parent, last = full_key[: -len(named.group(1)) - 1], named.group(1)
        else:
            parent, _, last = full_key.rpartition(".")
        if parent and not re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*|[0-9]+", last):  # a key such as '*' has no dotted spelling
            return (f"{where}{head}. Fix: a key like {last!r} cannot be written after a dot; add it as a mapping, "
                    f"+{parent}={{{last}:...}}, or in the config's YAML")
        return (f"{where}{head}. Fix: check the spelling; to add a new key where the schema allows free keys "
                f"(e.g. agent.vars), write +{full_key}=...")
    return f"{where}{head}. Fix: correct the override or YAML value to match the schema in compiler/schema.py"


def _undecodable_yaml(cp: ConfigPath) -> Path | None:
    """The first YAML file on the search path that is not UTF-8, or None."""
    for folder in cp.dirs():
        for path in sorted(Path(str(folder)).rglob("*.yaml")):
            try:
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                return path
            except OSError:
                continue
    return None
