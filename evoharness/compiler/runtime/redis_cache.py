"""The response cache in a Redis server, which machines sharing no folder all read and fill.

An entry is one key (``evoharness:reply:<request key>``) holding the reply's JSON, written with
one SET: a reader sees a whole entry or none. The password never appears in the location (which
every record keeps): it is read from ``REDIS_PASSWORD`` in each process's environment, as a
model's key is."""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.cache_entry import is_reply
from evoharness.compiler.secrets import scrub

log = logging.getLogger(__name__)

PREFIX = "evoharness:reply:"
EPISODE_PREFIX = "evoharness:episode:"  # a stored episode (search/evaluation/replay.py), beside the replies it was played with
PASSWORD_ENV = "REDIS_PASSWORD"
TIMEOUT_S = 5.0
SCHEMES = ("redis", "rediss")


def is_redis_url(location: str) -> bool:
    return urlsplit(location).scheme in SCHEMES


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

    def has_all(self, keys: Sequence[str]) -> bool:
        if self._down:
            return False
        import redis

        wanted = [PREFIX + k for k in dict.fromkeys(keys)]  # EXISTS counts a key named twice twice
        try:
            return not wanted or int(self._client.exists(*wanted)) == len(wanted)
        except redis.RedisError as exc:
            self._failed("be read", exc)
            return False

    def get_episode(self, key: str) -> dict[str, Any] | None:
        if self._down:
            return None
        import redis

        try:
            raw = self._client.get(EPISODE_PREFIX + key)
        except redis.RedisError as exc:
            self._failed("be read", exc)
            return None
        try:
            record = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def put_episode(self, key: str, value: Mapping[str, Any]) -> None:
        if self._down:
            return
        import redis

        try:
            self._client.set(EPISODE_PREFIX + key, scrub(json.dumps(value, separators=(",", ":"))))
        except redis.RedisError as exc:
            self._failed("be written", exc)

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        if self._down:
            return
        import redis

        try:
            self._client.set(PREFIX + key, scrub(json.dumps(value, separators=(",", ":"))))  # as a file entry is
        except redis.RedisError as exc:
            self._failed("be written", exc)
