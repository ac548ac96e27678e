"""Warm is a replay: an episode whose every model reply is in the response cache is read back from
the result stored when it was played, instead of played again (no environment, no tools, no
scorer, no request keys). The replies would be the same, so would the tools' outputs and the
verdict: the stored result is what playing it again would give, with nothing billed.

What decides an episode besides its replies is in its key: the variant (its content hash), the
task (every field), the sample and the run seed, the route's request settings and what keys its
replies (the provider's cache tag, litellm's version, the route's revision), the workload's name,
its scorer (the code that judges an episode: for a package, all its modules, and the modules the
workload names, such as its tool functions') and replayed tool outputs, and the code that plays an
episode (the runtime's source files and this package's version). A workload whose tools call a
live service is never replayed: nothing here decides their outputs.

An entry names the replies it was played with; one of them gone from the cache (removed, another
cache folder) and the episode plays again. Only an episode that ended without an infrastructure
failure, each of whose model calls went through the cache, is stored. An entry that is not one
(damaged, another version's, another episode's) is a miss: the episode plays.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoharness.compiler.provenance import package_version
from evoharness.compiler.runtime.cache import EpisodeCache, EpisodeWrites, ReplyCache, WriteBehind
from evoharness.compiler.runtime.loop import MODEL_LIMIT
from evoharness.compiler.runtime.models import ModelClient
from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.runtime.workload import Task, Workload, live_tools
from evoharness.compiler.variant import HarnessVariant, content_hash
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.evaluation.scorer import scorer_hash
from evoharness.search.evaluation.task_data import task_hash

log = logging.getLogger(__name__)

ENTRY_VERSION = 1
_KEY = re.compile(r"[0-9a-f]{64}")


@functools.cache
def code_hash() -> str:
    """sha256 of the code that plays an episode and turns it into a result: the runtime package's
    source files, the episode result's and this module's, and the package version."""
    import evoharness.compiler.runtime as runtime

    files = sorted(Path(runtime.__file__).parent.glob("*.py")) + [Path(__file__).with_name("episode.py"), Path(__file__)]
    digest = hashlib.sha256(package_version("evoharness").encode())
    for f in files:
        digest.update(f"\0{f.name}\0".encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


class EpisodeStore:
    """An evaluation's stored episodes: ``read`` one that can be replayed, ``keep`` one just
    played. Built by ``episode_store``; its writes go through their own thread, like the replies'."""

    def __init__(self, cache: EpisodeCache, base: str) -> None:
        self.cache = cache
        self.remote = bool(getattr(cache, "remote", False))
        self._base = base
        self._tasks: dict[str, str] = {}
        self._writes = WriteBehind(EpisodeWrites(cache))

    def key(self, task: Task, sample: int, seed: int) -> str:
        task_digest = self._tasks.get(task.task_id)
        if task_digest is None:
            task_digest = self._tasks[task.task_id] = task_hash(task)
        return content_hash({"episode": self._base, "task": task_digest, "sample": sample, "seed": seed})

    def read(self, task: Task, sample: int, seed: int) -> tuple[EpisodeResult, Trajectory] | None:
        """The stored episode as a warm run gives it, or None when it must be played."""
        key = self.key(task, sample, seed)
        entry = self.cache.get_episode(key)
        if entry is None:
            return None
        stored = _entry(entry, task_id=task.task_id, sample=sample)
        if stored is None:
            log.warning("stored episode %s is not one of %s sample %d: it plays again", key, task.task_id, sample)
            return None
        result, trajectory, replies = stored
        if not self.cache.has_all(replies):
            return None
        warm = replace(trajectory, model_calls=tuple(replace(c, cached=True, attempts=0, infra_s=0.0) for c in trajectory.model_calls))
        return result.replayed(warm), warm

    def keep(self, task: Task, sample: int, seed: int, result: EpisodeResult, trajectory: Trajectory) -> None:
        """Store an episode just played, when a warm run could replay it."""
        replies = [c.request_key for c in trajectory.model_calls]
        if (trajectory.status == "infra_error" or not result.scored or not all(replies)
                or any(r.startswith(MODEL_LIMIT) for r in trajectory.responses)):
            return  # an outage or a model's window cut it short: a warm run meets them again, so it plays
        self._writes.put(self.key(task, sample, seed), {"version": ENTRY_VERSION, "kind": "episode", "result": result.to_dict(),
                                                        "trajectory": trajectory.to_dict(), "replies": replies})

    def flush(self) -> None:
        self._writes.flush()


def episode_store(variant: HarnessVariant, workload: Workload, client: ModelClient, cache: ReplyCache | None, *,
                  strong: ModelClient | None = None) -> EpisodeStore | None:
    """The store of ``variant``'s episodes on ``workload`` in ``cache``, or None when none can be
    replayed: no cache, a cache that keeps no episodes, or tools that call a live service."""
    if cache is None or not isinstance(cache, EpisodeCache) or live_tools(workload):
        return None
    price, strong_price = client.billing.settings(), strong.billing.settings() if strong is not None else {}
    base = content_hash({
        "version": ENTRY_VERSION, "code": code_hash(), "variant": variant.content_hash, "route": client.key_settings(),
        # an escalation route's settings only when there is one: the stores of variants without keep their keys
        **({"escalation_route": strong.key_settings()} if strong is not None else {}),
        # a route's own price is not in its replies' keys: a corrected one plays the episodes again from the
        # cached replies, repriced (nothing is paid); absent when litellm's map prices the route, as before
        **({"price": price} if price else {}),
        **({"escalation_price": strong_price} if strong_price else {}),
        "workload": {"name": workload.name, "scorer": scorer_hash(workload), "tool_outputs": getattr(workload, "tool_outputs_hash", None)},
    })
    return EpisodeStore(cache, base)


def _entry(entry: Mapping[str, Any], *, task_id: str, sample: int) -> tuple[EpisodeResult, Trajectory, list[str]] | None:
    """A stored entry read whole, or None: another version's, a damaged one, or another episode's."""
    if entry.get("version") != ENTRY_VERSION or entry.get("kind") != "episode":
        return None
    replies = entry.get("replies")
    if not isinstance(replies, list) or not all(isinstance(r, str) and _KEY.fullmatch(r) for r in replies):
        return None
    try:
        result = EpisodeResult.from_dict(entry["result"])
        trajectory = Trajectory.from_dict(entry["trajectory"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if (result.task_id, result.sample, trajectory.task_id, trajectory.sample) != (task_id, sample, task_id, sample):
        return None
    if len(replies) != len(trajectory.model_calls) or not result.scored:
        return None
    if not all(c.cost_usd is None or (isinstance(c.cost_usd, int | float) and math.isfinite(c.cost_usd) and c.cost_usd >= 0)
               for c in trajectory.model_calls):  # a cost no bill can be: its replies are not replayed either
        return None
    return result, trajectory, replies
