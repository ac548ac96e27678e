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
    squashed = re.sub(r"[^a-z0-9]", "", key.lower())
    words = set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).lower()))
    # whole words only: max_tokens and input_cost_per_token are not credentials
    return any(part in squashed for part in _SECRET_KEY_PARTS) or bool(words & {"token", "auth"})


def public_url(url: str) -> str:
    """A storage URL with any password masked, for records and reports."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a database URL (e.g. a journal file): nothing to hide
        return url
