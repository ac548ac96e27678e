"""Tool-output snapshots: the read-only lens on a live tool (a web search, a clock, a service).

In ``record`` mode each live call's output is stored under its tool and canonical arguments. In
``replay`` mode the output is served from the file and the live tool is never called, so runs
replay deterministically and the holdout's tool outputs cannot drift. The file's content hash
goes into the search's freeze. A replay miss is never a live call:
- ``on_miss=error`` stops the run with one line naming the call;
- ``on_miss=skip`` makes the episode an infrastructure skip, never a score of 0.

Writes take a file lock and replace the file atomically, so parallel episodes and a second
process can record into one file.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from evoharness.compiler.atomic import unwritable, write_json_atomic
from evoharness.compiler.errors import ConfigError

Mode = Literal["live", "record", "replay"]
MODES: tuple[str, ...] = ("live", "record", "replay")


class ToolInfraError(Exception):
    """A tool failure that is the infrastructure's, not the model's: the episode is skipped.

    Raise it from ``Environment.call`` when a live service is down or a recorded output is
    missing; its message is the skip's reason in the records.
    """


def call_key(tool: str, arguments: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps([tool, dict(arguments)], sort_keys=True, default=str).encode("utf-8")).hexdigest()


class ToolOutputs:
    """One snapshot file of live tool outputs, and the mode it is used in."""

    def __init__(self, path: str | Path, *, mode: str = "replay", on_miss: str = "error") -> None:
        if mode not in MODES:
            raise ConfigError("workload.options.tool_outputs.mode", f"unknown mode {mode!r}", f"use one of {list(MODES)}")
        if on_miss not in ("error", "skip"):
            raise ConfigError("workload.options.tool_outputs.on_miss", f"unknown value {on_miss!r}", "use error or skip")
        self.path, self.mode, self.on_miss = Path(path).expanduser().absolute(), mode, on_miss
        if mode == "replay" and not self.path.is_file():
            raise ConfigError("workload.options.tool_outputs.path", f"no snapshot at {self.path}",
                              "record one first with tool_outputs.mode=record (the live tools run once and their outputs are kept)")
        if mode == "record":
            self._check_writable()
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = self._read()

    def _check_writable(self) -> None:
        """Before any episode: a recording that cannot be stored must not turn into tool errors the model sees."""
        if self.path.is_dir():
            raise ConfigError("workload.options.tool_outputs.path", f"{self.path} is a folder", "name a file, e.g. <folder>/tools.json")
        trouble = unwritable(self.path.parent)
        if trouble is not None:
            raise ConfigError("workload.options.tool_outputs.path", f"cannot write a snapshot in {self.path.parent} "
                              f"({'a file is in the way at ' + str(trouble[0]) if trouble[1] == 'file' else trouble[1]})",
                              "point it at a file in a folder you can write")

    def _read(self) -> dict[str, dict[str, Any]]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError("workload.options.tool_outputs.path", f"{self.path} is not a snapshot file ({exc})",
                              "point it at a file tool_outputs.mode=record wrote, or record a new one") from None
        entries = data.get("outputs") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            raise ConfigError("workload.options.tool_outputs.path", f"{self.path} has no outputs mapping",
                              "record a new one with tool_outputs.mode=record")
        return entries

    def content_hash(self) -> str:
        """sha256 of the outputs (what a replay serves), canonical JSON."""
        return hashlib.sha256(json.dumps(self._entries, sort_keys=True).encode("utf-8")).hexdigest()

    def get(self, tool: str, arguments: Mapping[str, Any]) -> str:
        entry = self._entries.get(call_key(tool, arguments))
        if entry is not None:
            return str(entry["output"])
        shown = json.dumps(dict(arguments), sort_keys=True, default=str)[:200]
        if self.on_miss == "skip":
            raise ToolInfraError(f"tool-output snapshot {self.path.name} has no {tool}({shown}); the episode is skipped")
        raise ConfigError("workload.options.tool_outputs", f"the snapshot {self.path} has no output for {tool}({shown})",
                          "record the missing calls with tool_outputs.mode=record, or set tool_outputs.on_miss=skip")

    def put(self, tool: str, arguments: Mapping[str, Any], output: str) -> None:
        key = call_key(tool, arguments)
        try:
            self._put(key, tool, arguments, output)
        except OSError as exc:  # the disk, not the model: the run stops with one line
            raise ConfigError("workload.options.tool_outputs.path", f"cannot record into {self.path} ({exc.strerror or exc})",
                              "point it at a file in a folder you can write") from None

    def _put(self, key: str, tool: str, arguments: Mapping[str, Any], output: str) -> None:
        with self._lock, FileLock(str(self.path) + ".lock"):
            on_disk = self._read()  # another process may have recorded meanwhile
            # the latest recording wins: a replay serves what the recording run's model saw last
            on_disk[key] = {"tool": tool, "arguments": json.loads(json.dumps(dict(arguments), default=str)), "output": output}
            self._entries = on_disk
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, {"kind": "tool_outputs", "schema_version": 1, "outputs": on_disk})
