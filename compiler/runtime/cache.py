"""The response cache keyed by the full request, so a finished run replays offline for free: in a
folder, or in a Redis server that machines sharing no folder all read and fill."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from compiler.atomic import write_json_atomic
from compiler.errors import ConfigError
from compiler.variant import canonical_json, content_hash

log = logging.getLogger(__name__)
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def is_reply(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("tool_calls", []), list):
        return False
    if not isinstance(record.get("content"), str | None):
        return False
    calls_ok = all(isinstance(c, dict) and {"id", "name", "arguments"} <= set(c) for c in record.get("tool_calls", []))
    numbers_ok = all(isinstance(record.get(k, 0), int | float) and not isinstance(record.get(k, 0), bool)
                     for k in ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "attempts", "infra_s"))
    return calls_ok and numbers_ok


def request_key(request: Mapping[str, Any]) -> str:
    """sha256 of the canonical request (credentials are never part of it)."""
    return content_hash(dict(request))


class RequestKeyer:
    """``request_key`` for the calls of one route, with each tools list encoded once.

    A variant sends the same tools list on every call (``HarnessVariant.native_tools_for`` hands
    out one list per selection, never changed), and it is three quarters of a request's canonical
    text. The request carries a copy (litellm may adapt what it is given), so the caller names the
    variant's own list as ``tools``: its text is memoised by identity. The key is the same string's
    hash as ``request_key``'s: a canonical object is its sorted members joined, so a memoised member
    splices in unchanged, and a cache filled by one is read by the other."""

    def __init__(self) -> None:
        self._tools: dict[int, tuple[object, str]] = {}  # id -> (the list itself, kept so the id stays its own; its text)

    def _tools_json(self, tools: Sequence[Any]) -> str:
        held = self._tools.get(id(tools))
        if held is None or held[0] is not tools:
            held = (tools, canonical_json(tools))
            self._tools[id(tools)] = held
        return held[1]

    def __call__(self, request: Mapping[str, Any], *, tools: Sequence[Any] | None = None) -> str:
        """The key of ``request``; ``tools`` is the list ``request["tools"]`` was copied from."""
        def member(k: str, v: Any) -> str:
            return self._tools_json(tools) if k == "tools" and tools is not None else canonical_json(v)

        members = ",".join(f"{canonical_json(k)}:{member(k, v)}" for k, v in sorted(request.items()))
        return hashlib.sha256(f"{{{members}}}".encode()).hexdigest()


class ReplyCache(Protocol):
    """Where replies are kept: ``get`` a stored reply or None (a damaged entry is a miss), ``put``
    one (a failure is one warning, never the run's end); ``remote`` when a call is a network round trip."""

    remote: bool

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: Mapping[str, Any]) -> None: ...


def open_cache(location: str | Path) -> ReplyCache:
    """The response cache at ``location``: a folder, or a Redis server (``redis://host:6379/0``)
    that machines sharing no folder can all read and fill."""
    if is_redis_url(str(location)):
        return RedisResponseCache(str(location))
    return ResponseCache(location)


class ResponseCache:
    remote = False  # a local file: read on the event loop

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.writable = True  # until a write fails: then the run goes on uncached (a job on a machine without the folder)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply, or None. An entry that is not a reply (truncated, edited, another
        version's) is a miss: the call is made again and the entry rewritten, never half-trusted."""
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):  # not cached (or no cache folder there): a plain miss
            return None
        except (OSError, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
            log.warning("response cache entry %s is unreadable (%s): asking the model again", path, exc)
            return None
        if not is_reply(record):
            log.warning("response cache entry %s is not a model reply: asking the model again", path)
            return None
        return record

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store a reply (temp file, then rename: a reader never sees half an entry). A cache that
        cannot be written is an optimisation lost, not an evaluation lost: one warning, then no more tries."""
        if not self.writable:
            return
        try:
            write_json_atomic(self._path(key), value, indent=None, fsync=False)  # a torn entry reads as a miss
        except OSError as exc:
            self.writable = False
            with _WARNED_LOCK:  # writes run in threads, and every evaluation opens the cache anew: one line per folder
                if str(self.root) in _WARNED:
                    return
                _WARNED.add(str(self.root))
            log.warning("response cache %s cannot be written (%s): this run's replies are not cached", self.root, exc)


# -- the same cache in a Redis server, for machines that share no folder -------------------
# An entry is one key (``evoharness:reply:<request key>``) holding the reply's JSON, written with
# one SET: a reader sees a whole entry or none. The password never appears in the location (which
# every record keeps): it is read from ``REDIS_PASSWORD`` in each process's environment, as a
# model's key is.
PREFIX = "evoharness:reply:"
SCHEMES = ("redis", "rediss")
PASSWORD_ENV = "REDIS_PASSWORD"
TIMEOUT_S = 5.0


def is_redis_url(location: str) -> bool:
    return urlsplit(location).scheme in SCHEMES


def is_url(location: str) -> bool:
    """A location written as a URL (``scheme://...``): never a folder, whether or not it is a Redis one."""
    return "://" in location


def check_location(location: str, *, key: str = "cache_dir") -> None:
    """A Redis location that can be used: ``redis[s]://HOST[:PORT][/DB]`` and nothing else (no
    password, no options: the location is kept in every record), the client installed, the server
    answering. Called before any paid work; each failure is one ConfigError."""
    example = "write redis://HOST:6379/0 (or rediss:// for TLS)"
    parts = urlsplit(location)
    if parts.scheme not in SCHEMES or not location.startswith(f"{parts.scheme}://"):
        raise ConfigError(key, f"{location.split('://')[0]!r}:// is not a cache location this project reads (a folder, or "
                          "redis:// / rediss://)", example)
    if parts.query or parts.fragment:  # redis-py would read ?password= from it, and every record keeps the location
        raise ConfigError(key, "the Redis URL carries options (?... or #...), which the cache does not take, and a "
                          "?password= there would be kept in every record", f"drop them; put the password in {PASSWORD_ENV}")
    if parts.password is not None:
        raise ConfigError(key, "the Redis URL carries a password, and the cache location is kept in every record",
                          f"drop it from the URL and export {PASSWORD_ENV} instead")
    try:
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise ConfigError(key, f"{location!r} has a port that is not a number", example) from None
    if not parts.hostname:
        raise ConfigError(key, f"{location!r} names no host", example)
    db = parts.path.strip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise ConfigError(key, f"{location!r}: the database {db!r} is not a number", f"{example}; databases are numbered")
    try:
        import redis
    except ImportError:
        raise ConfigError(key, "a Redis cache needs the redis client", "pip install -e '.[redis]'") from None
    try:
        client(location).ping()
    except redis.AuthenticationError as exc:
        raise ConfigError(key, f"the Redis server at {location} refused the password ({_first_line(exc)})",
                          f"export {PASSWORD_ENV} with the server's password") from None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        if "auth" in str(exc).lower():  # a server with a password, asked without one
            raise ConfigError(key, f"the Redis server at {location} wants a password ({_first_line(exc)})",
                              f"export {PASSWORD_ENV} with the server's password") from None
        raise ConfigError(key, f"the Redis server at {location} does not answer ({_first_line(exc)})",
                          "start it (redis-server), fix the address, or point cache_dir at a folder") from None
    except redis.RedisError as exc:  # it answered, and refused: a database past its count, an ACL
        raise ConfigError(key, f"the Redis server at {location} refused the connection ({_first_line(exc)})",
                          "check the database number and the user against the server's config") from None


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def client(location: str) -> Any:
    import redis

    return redis.Redis.from_url(location, password=os.environ.get(PASSWORD_ENV) or None, socket_timeout=TIMEOUT_S,
                                socket_connect_timeout=TIMEOUT_S)


class RedisResponseCache:
    """``ResponseCache``'s contract on a Redis server. A server that stops answering mid-run is an
    optimisation lost, not an evaluation lost: one warning, then the run goes on uncached (asking
    again after each timeout would stall every call)."""

    remote = True  # a network round trip: the model client calls it off the event loop

    def __init__(self, location: str) -> None:
        self.location = location
        self._client = client(location)
        self._down = False
        self._lock = threading.Lock()

    def _failed(self, what: str, exc: Exception) -> None:
        with self._lock:
            if self._down:
                return
            self._down = True
        log.warning("response cache %s could not %s (%s): this run's replies are not cached", self.location, what, _first_line(exc))

    def get(self, key: str) -> dict[str, Any] | None:
        if self._down:
            return None
        import redis

        try:
            raw = self._client.get(PREFIX + key)
        except redis.RedisError as exc:
            self._failed("be read", exc)
            return None
        if raw is None:
            return None
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        if not is_reply(record):
            log.warning("response cache entry %s%s in %s is not a model reply: asking the model again", PREFIX, key, self.location)
            return None
        return record  # type: ignore[no-any-return]

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        if self._down:
            return
        import redis

        try:
            self._client.set(PREFIX + key, json.dumps(value, separators=(",", ":")))
        except redis.RedisError as exc:
            self._failed("be written", exc)
