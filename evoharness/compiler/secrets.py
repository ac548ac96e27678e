"""Refuse credentials where they must never land: variants, snapshots, records."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Provider key shapes (OpenAI/Anthropic sk-, AWS, GitHub, Slack, Google, Hugging Face).
_SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9])(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{35}|hf_[A-Za-z0-9]{30,})"
)
_URL_PASSWORD = re.compile(r"://[^/:@\s]+:[^@/\s]+@")  # scheme://user:password@host
_SECRET_KEY_PARTS = ("apikey", "secret", "password", "passwd", "credential", "privatekey", "accesskey", "authorization")


def find_secret(value: Any, path: str = "") -> str | None:
    """Path of the first thing that looks like a credential, or None. Only *_env names may hold key-ish keys."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if _secret_key(str(key)) and isinstance(item, str) and item.strip():
                return where
            found = find_secret(item, where)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = find_secret(item, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and (_SECRET_VALUE.search(value) or _URL_PASSWORD.search(value)):
        return path
    return None


def _secret_key(key: str) -> bool:
    if key.lower().endswith("_env"):  # api_key_env holds the NAME of an env var: the one allowed form
        return False
    leaf = key.rsplit(".", 1)[-1]  # an override's key is a dotted path: only the setting's own name counts
    squashed = re.sub(r"[^a-z0-9]", "", leaf.lower())
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", leaf).lower()) if w]
    # "token"/"auth" as the name's last word (access_token, hf_token, auth); not a price or a count
    # (input_cost_per_token, max_tokens)
    ends_credential = bool(words) and words[-1] in ("token", "auth") and "per" not in words and "cost" not in words
    return any(part in squashed for part in _SECRET_KEY_PARTS) or ends_credential


def public_url(url: str) -> str:
    """A storage URL with any password masked, for records and reports."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a database URL (e.g. a journal file): nothing to hide
        return url


# --- secrets by value -------------------------------------------------------------------------
# A key need not look like one: detection by shape misses a plain 40-character token. So the values
# of every environment variable the config reads (each api_key_env, each ${oc.env:...}) and of any
# credential-named variable are remembered at start, and every file the run writes, every log
# record and every error line has them replaced by a marker naming the variable. The marker is the
# interpolation that reads it, ${oc.env:NAME}: a record says where the value came from, and a
# registry snapshot holding one is released by re-reading the variable (only one the releasing
# config itself reads: see compiler/release/merge.py), never by carrying the value.

MIN_SECRET_CHARS = 8  # shorter values ("1", "dev") would scrub ordinary words
_ENV_REF = re.compile(r"\$\{oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)")
_CREDENTIAL_ENV = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ACCESS_KEY)", re.IGNORECASE)
_MARKER = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}")
_KNOWN: dict[str, str] = {}  # value -> name of the environment variable it came from
# variables the config itself interpolates (${oc.env:...}): a snapshot may re-read only these. A key's
# variable named by api_key_env is not among them: it goes in a request header, and a snapshot that
# could interpolate it into a prompt would send it to whatever host serves that prompt.
_READ: set[str] = set()


def marker(name: str) -> str:
    return "${oc.env:" + name + "}"


def remember_env(name: str | None, *, read: bool = True) -> None:
    """Scrub the value of environment variable ``name`` (if set and long enough) from all output;
    ``read``: the config reads it (so a snapshot's marker of it may be released)."""
    import os

    value = os.environ.get(name) if name else None
    if name and read:
        _READ.add(name)
    if name and value and len(value) >= MIN_SECRET_CHARS:
        _KNOWN[value] = name


def remember_credential_env(config_text: str = "") -> None:
    """Scrub every credential-named variable's value (``*_API_KEY``, ``*_TOKEN``, ...), read or not:
    done first thing, so even an error about a config that fails to compose cannot print one. One
    whose value ``config_text`` holds literally counts as read: the config carries it already."""
    import os

    for name in os.environ:
        if _CREDENTIAL_ENV.search(name):
            value = os.environ[name]
            remember_env(name, read=bool(config_text) and len(value) >= MIN_SECRET_CHARS and value in config_text)


def watch_env_resolver() -> None:
    """Wrap OmegaConf's ``oc.env`` so every variable it resolves, whatever the spelling (quoted,
    computed from another interpolation), is remembered as read and scrubbed (idempotent)."""
    from omegaconf import OmegaConf
    from omegaconf.resolvers import oc

    if getattr(watch_env_resolver, "_installed", False):
        return

    def env(key: str, default: Any = oc._DEFAULT_MARKER_) -> Any:
        value = oc.env(key, default) if default is not oc._DEFAULT_MARKER_ else oc.env(key)
        remember_env(str(key))
        return value

    OmegaConf.register_new_resolver("oc.env", env, replace=True, use_cache=False)
    watch_env_resolver._installed = True  # type: ignore[attr-defined]


def remember_config(cfg: Any) -> None:
    """Remember what ``cfg`` (a DictConfig or plain data, unresolved) reads from the environment:
    every api_key_env variable, every ${oc.env:...}, and every credential-named variable."""
    import json

    from omegaconf import DictConfig, ListConfig, OmegaConf

    data = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, (DictConfig, ListConfig)) else cfg
    keys: set[str] = set()
    interpolated: set[str] = set()
    _env_refs(data, keys, interpolated)
    for name in keys | interpolated:
        remember_env(name, read=name in interpolated)  # a key's variable alone is scrubbed, never released
    remember_credential_env(json.dumps(data, ensure_ascii=False, default=str))


def _env_refs(value: Any, keys: set[str], interpolated: set[str]) -> None:
    """Collect the variables ``value`` names: by an ``api_key_env`` into ``keys``, by ${oc.env:...} into ``interpolated``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if str(key) == "api_key_env" and isinstance(item, str):
                keys.add(item)
            _env_refs(item, keys, interpolated)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _env_refs(item, keys, interpolated)
    elif isinstance(value, str):
        interpolated.update(_ENV_REF.findall(value))


def scrub(text: str) -> str:
    """``text`` with every remembered secret value (raw or JSON-escaped) replaced by its marker."""
    import json

    for value in sorted(_KNOWN, key=len, reverse=True):
        name = _KNOWN[value]
        if value in text:
            text = text.replace(value, marker(name))
        escaped = json.dumps(value, ensure_ascii=False)[1:-1]
        if escaped != value and escaped in text:
            text = text.replace(escaped, marker(name))
    return text


def scrub_data(value: Any) -> Any:
    """Plain data with every string scrubbed (keys included)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {scrub(str(k)): scrub_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_data(v) for v in value]
    return value


def remembered(name: str) -> bool:
    """Whether this process's config interpolates environment variable ``name`` (${oc.env:...}); a
    key's variable named only by api_key_env, or a credential-named variable it merely scrubs, does not count."""
    return name in _READ


def holds_secret(text: str) -> str | None:
    """Name of the environment variable whose value ``text`` contains, or None."""
    return next((name for value, name in _KNOWN.items() if value in text), None)


def restore(value: Any) -> Any:
    """Markers back to the values, for the search's own job files only: a marker naming a variable
    this process did not remember stays as it is (a snapshot cannot pull an arbitrary variable in)."""
    if isinstance(value, str):
        # only variables the config itself interpolates: a key's variable, or any other remembered only
        # to be scrubbed, stays a marker, or text shaped like one (a snapshot's, a mutator's) would fill it in
        by_name = {name: secret for secret, name in _KNOWN.items() if name in _READ}
        return _MARKER.sub(lambda m: by_name.get(m.group(1), m.group(0)), value) if "${oc.env:" in value else value
    if isinstance(value, Mapping):
        return {k: restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(v) for v in value]
    return value


def install_log_scrubber() -> None:
    """Every log record, from any logger, leaves with secret values scrubbed (idempotent)."""
    import logging

    factory = logging.getLogRecordFactory()
    if getattr(factory, "_evoharness_scrubs", False):
        return

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        if _KNOWN:
            record.msg, record.args = scrub(record.getMessage()), None
        return record

    make._evoharness_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make)
