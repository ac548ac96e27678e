"""The response cache keyed by the full request, so a finished run replays offline for free: in a
folder, or in a Redis server that machines sharing no folder all read and fill."""
from __future__ import annotations

import hashlib
import json
import logging
import queue
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evoharness.compiler.atomic import write_json_atomic
from evoharness.compiler.runtime.cache_entry import is_reply
from evoharness.compiler.runtime.redis_cache import RedisResponseCache, is_redis_url
from evoharness.compiler.secrets import scrub_data
from evoharness.compiler.variant import canonical_json, content_hash

log = logging.getLogger(__name__)
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def request_key(request: Mapping[str, Any]) -> str:
    """sha256 of the canonical request (credentials are never part of it)."""
    return content_hash(dict(request))


class RequestKeyer:
    """``request_key`` for the calls of one route, with each tools list and message encoded once.

    A variant sends the same tools list on every call (``HarnessVariant.native_tools_for`` hands
    out one list per selection, never changed), and it is three quarters of a request's canonical
    text. The request carries a copy (litellm may adapt what it is given), so the caller names the
    variant's own list as ``tools``: its text is memoised by identity. An episode's messages are
    sent again on each of its later calls: each message's text is memoised by identity too, and
    used only while the message holds the very same values (a value replaced or added since makes
    it encoded afresh; the runtime never edits a message it sent). The key is the same string's hash
    as ``request_key``'s: a canonical object is its sorted members joined, so a memoised member
    splices in unchanged, and a cache filled by one is read by the other."""

    MESSAGES_HELD = 4096  # an evaluation's episodes in flight send a few hundred messages between them

    def __init__(self) -> None:
        self._tools: dict[int, tuple[object, str]] = {}  # id -> (the list itself, kept so the id stays its own; its text)
        self._messages: OrderedDict[int, tuple[dict[str, Any], tuple[tuple[str, Any], ...], str]] = OrderedDict()

    def _tools_json(self, tools: Sequence[Any]) -> str:
        held = self._tools.get(id(tools))
        if held is None or held[0] is not tools:
            held = (tools, canonical_json(tools))
            self._tools[id(tools)] = held
        return held[1]

    def _message_json(self, message: Any) -> str:
        if type(message) is not dict:
            return canonical_json(message)
        held = self._messages.get(id(message))
        if (held is not None and held[0] is message and len(held[1]) == len(message)
                and all(message.get(k, _ABSENT) is v for k, v in held[1])):
            self._messages.move_to_end(id(message))
            return held[2]
        text = canonical_json(message)
        self._messages[id(message)] = (message, tuple(message.items()), text)  # the values held too: no id is reused
        if len(self._messages) > self.MESSAGES_HELD:
            self._messages.popitem(last=False)
        return text

    def __call__(self, request: Mapping[str, Any], *, tools: Sequence[Any] | None = None) -> str:
        """The key of ``request``; ``tools`` is the list ``request["tools"]`` was copied from."""
        def member(k: str, v: Any) -> str:
            if k == "tools" and tools is not None:
                return self._tools_json(tools)
            if k == "messages" and type(v) is list:
                return f"[{','.join(self._message_json(m) for m in v)}]"
            return canonical_json(v)

        members = ",".join(f"{canonical_json(k)}:{member(k, v)}" for k, v in sorted(request.items()))
        return hashlib.sha256(f"{{{members}}}".encode()).hexdigest()


_ABSENT = object()


class ReplyCache(Protocol):
    """Where replies are kept: ``get`` a stored reply or None (a damaged entry is a miss), ``put``
    one (a failure is one warning, never the run's end); ``remote`` when a call is a network round trip."""

    remote: bool

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: Mapping[str, Any]) -> None: ...


@runtime_checkable
class EpisodeCache(Protocol):
    """A reply cache that also keeps whole episodes beside the replies they were played with: a
    warm episode is read back instead of run again (search/evaluation/replay.py). ``has_all``: every
    one of these replies is stored."""

    def has_all(self, keys: Sequence[str]) -> bool: ...

    def get_episode(self, key: str) -> dict[str, Any] | None: ...

    def put_episode(self, key: str, value: Mapping[str, Any]) -> None: ...


class Writes(Protocol):
    """What a ``WriteBehind`` hands its entries to."""

    def put(self, key: str, value: Mapping[str, Any]) -> None: ...


class EpisodeWrites:
    """``put`` as an episode cache's ``put_episode``: what a ``WriteBehind`` hands its entries to."""

    def __init__(self, cache: EpisodeCache) -> None:
        self.cache = cache

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        self.cache.put_episode(key, value)


def is_url(location: str) -> bool:
    """A location written as a URL (``scheme://...``): never a folder, whether or not it is a Redis one."""
    return "://" in location


class WriteBehind:
    """A cache's writes made in order by one thread of their own: an episode hands its reply over
    and goes on, without waiting for the disk or the network and without a thread hop per entry
    (``asyncio.to_thread`` for each of an evaluation's thousands of writes cost more CPU than the
    writes). Until an entry is written, ``pending`` has it: a call that asks the same again right
    away is answered from it, as it would have been from the cache. The thread ends once the queue
    is empty and it is told to (``flush``), or has idled ``IDLE_S``; it is not a daemon, so the
    interpreter waits for it at exit and only a killed process loses what was still queued:
    replies a later run pays for again."""

    IDLE_S = 0.5

    def __init__(self, cache: Writes) -> None:
        self.cache = cache
        self._queue: queue.Queue[tuple[str, Mapping[str, Any]] | None] = queue.Queue()
        self._lock = threading.Lock()  # an entry is never queued behind a thread that has decided to end
        self._thread: threading.Thread | None = None
        self._pending: dict[str, Mapping[str, Any]] = {}

    def pending(self, key: str) -> dict[str, Any] | None:
        """The reply handed over under ``key`` and not yet written, or None."""
        value = self._pending.get(key)
        return scrub_data(value) if value is not None else None  # as the stored entry will read: secrets scrubbed

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            if self._thread is None:
                thread = self._writer()
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had (interpreter shutdown, a thread limit): written here
                    self.cache.put(key, value)
                    return
                self._thread = thread
            self._pending[key] = value
            self._queue.put((key, value))

    def _writer(self) -> threading.Thread:
        return threading.Thread(target=self._drain, name="evoharness-cache-writer")

    def _drain(self) -> None:
        try:
            self._drain_queue()
        finally:  # whatever ended it (even a BaseException from a backend), the next put starts a writer
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None
                    if not self._queue.empty():
                        self._thread = self._writer()
                        self._thread.start()

    def _drain_queue(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.IDLE_S)
            except queue.Empty:
                item = None
            else:
                if item is not None:
                    key, value = item
                    try:
                        self.cache.put(key, value)
                    except Exception as exc:  # a backend's own failure costs an entry, never the run
                        log.warning("response cache entry %s was not written (%s: %s)", key, type(exc).__name__, exc)
                    finally:
                        with self._lock:
                            if self._pending.get(key) is value:  # a later reply under the key waits its own turn
                                del self._pending[key]
                        self._queue.task_done()
                    continue
                self._queue.task_done()
            with self._lock:
                if self._queue.empty():
                    return  # _drain lets the thread go, under this lock

    def flush(self) -> None:
        """Return once every entry handed over so far is written, and let the thread end."""
        with self._lock:
            if self._thread is None:
                return
            self._queue.put(None)
        self._queue.join()


def open_cache(location: str | Path) -> ReplyCache:
    """The response cache at ``location``: a folder, or a Redis server (``redis://host:6379/0``,
    compiler/runtime/redis_cache.py) that machines sharing no folder can all read and fill."""
    if is_redis_url(str(location)):
        return RedisResponseCache(str(location))
    return ResponseCache(location)


_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")


class ResponseCache:
    remote = False  # a local file: read on the event loop

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.writable = True  # until a write fails: then the run goes on uncached (a job on a machine without the folder)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _episode_path(self, key: str) -> Path:
        return self.root / "episodes" / key[:2] / f"{key}.json"  # no reply key is "episodes": never a reply's folder

    def has_all(self, keys: Sequence[str]) -> bool:
        return all(self._path(k).is_file() for k in keys)

    def entries(self) -> Iterator[tuple[str, Path]]:
        """Every entry the cache holds, as ("reply" | "episode", its file): only files laid out as
        entries are (a folder of two hex digits, a 64-hex-digit name), never anything else in the folder."""
        for kind, base in (("reply", self.root), ("episode", self.root / "episodes")):
            if not base.is_dir():
                continue
            for folder in sorted(base.iterdir()):
                if folder.is_dir() and not folder.is_symlink() and _SHARD.fullmatch(folder.name):
                    yield from ((kind, f) for f in sorted(folder.iterdir())
                                if f.is_file() and not f.is_symlink() and _ENTRY.fullmatch(f.name) and f.name[:2] == folder.name)

    def get_episode(self, key: str) -> dict[str, Any] | None:
        """The stored episode, or None; an entry that is not JSON is a miss (the episode runs)."""
        try:
            record = json.loads(self._episode_path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError) as exc:
            log.warning("stored episode %s is unreadable (%s): it runs again", self._episode_path(key), exc)
            return None
        return record if isinstance(record, dict) else None

    def put_episode(self, key: str, value: Mapping[str, Any]) -> None:
        if not self.writable:
            return
        try:
            write_json_atomic(self._episode_path(key), value, indent=None, fsync=False)
        except OSError as exc:  # a lost entry is a warm run that plays the episode: one line, like a reply's
            self.writable = False
            log.warning("response cache %s cannot be written (%s): this run's episodes are not stored", self.root, exc)

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
