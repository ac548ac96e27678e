"""Transcripts: what the agent did in each episode, kept beside its evaluation record.

One transcript per played episode: the conversation as the model was last sent it (system prompt,
user turns, replies with their tool calls, tool results), each model call's tokens, cost and
latency, and the scorer's verdict and failure records. A repeat that was not run (an identical
temperature-0 sample standing in) has none of its own: its sample 0 is what it did.

Stored as gzip-compressed JSON lines in a sidecar of the record (``eval.json`` ->
``eval.transcripts.jsonl.gz``), one line per episode, each carrying its schema version. Gzip
members concatenate into one valid file, so the blocks of a raced evaluation make its whole
sidecar by concatenation. Long message text is cut in the middle with a marker saying how much was
cut; every secret value the process knows is replaced by its marker before the sidecar is written.
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_bytes_atomic
from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.secrets import scrub
from evoharness.search.evaluation.episode import EpisodeResult
from evoharness.search.records.versions import checked, versioned

MAX_MESSAGE_CHARS = 6000  # a tool result or reply longer than this keeps its head and tail
SUFFIX = ".transcripts.jsonl.gz"
MAX_SIDECAR_BYTES = 256 << 20  # uncompressed: a dev evaluation's is a few MB; more is a forged or broken file


def clipped(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` whole, or its head and tail around a marker naming how much was cut, in at most
    ``limit`` characters (so clipping a clipped text changes nothing)."""
    if len(text) <= limit:
        return text
    keep = limit - 48  # the marker's room, whatever the count in it
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return f"{text[:head]}\n[… {len(text) - head - tail} characters cut …]\n{text[-tail:]}"


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": str(m.get("role", "")), "content": str(m.get("content") or "")}
    calls = m.get("tool_calls") or ()
    if calls:
        out["tool_calls"] = [{"id": str(c.get("id", "")), "name": str((c.get("function") or {}).get("name", "")),
                              "arguments": str((c.get("function") or {}).get("arguments", ""))} for c in calls]
    if m.get("tool_call_id"):
        out["tool_call_id"] = str(m["tool_call_id"])
    return out


def _clip_line(line: Mapping[str, Any]) -> dict[str, Any]:
    messages = [{**m, "content": clipped(str(m.get("content", ""))),
                 **({"tool_calls": [{**c, "arguments": clipped(str(c.get("arguments", "")))} for c in m["tool_calls"]]}
                    if m.get("tool_calls") else {})} for m in line.get("messages", ())]
    return {**line, "messages": messages}


def transcript(result: EpisodeResult, trajectory: Trajectory) -> dict[str, Any]:
    """One episode's transcript (plain data, one JSON line of the sidecar)."""
    return versioned("transcript", {
        "task_id": result.task_id, "sample": result.sample, "status": result.status, "passed": result.passed,
        "score": result.score, "detail": result.detail, "failures": [dict(f) for f in result.failures],
        "end": trajectory.status, "infra_error": trajectory.infra_error,
        "cost_usd": result.cost_usd, "latency_s": result.latency_s,
        "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
        "calls": [{"turn": c.turn, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens, "cost_usd": c.cost_usd,
                   "latency_s": c.latency_s, "cached": c.cached, "finish_reason": c.finish_reason, "parse_error": c.parse_error,
                   "infra_error": c.infra_error} for c in trajectory.model_calls],
        "messages": [_message(m) for m in trajectory.messages],
    })


def pack(results: Iterable[EpisodeResult], trajectories: Iterable[Trajectory]) -> bytes:
    """The played episodes among ``results`` (a stand-in, with no trajectory of its own, has no
    line), in the results' order, whole: ``write`` scrubs them, then clips them (a secret cut in two
    by a clip could no longer be found). Compressed where they ran: the blob crosses a process."""
    played = {(t.task_id, t.sample): t for t in trajectories}
    lines = "".join(json.dumps(transcript(r, played[(r.task_id, r.sample)]), ensure_ascii=False, separators=(",", ":")) + "\n"
                    for r in results if (r.task_id, r.sample) in played)
    return gzip.compress(lines.encode("utf-8"), compresslevel=6, mtime=0) if lines else b""


def sidecar(record: Path) -> Path:
    """Where the transcripts of the evaluation record ``record`` (``x.json``) are kept."""
    return record.with_name(record.name.removesuffix(".json") + SUFFIX)


def write(record: Path, blob: bytes) -> None:
    """Keep ``blob`` (``pack``'s bytes, several concatenated) as the sidecar of ``record``: every
    secret value this process knows replaced by its marker (raw or JSON-escaped, in the whole text,
    before anything is cut), then long text clipped. Nothing to keep: no file."""
    if not blob:
        return
    lines = scrub(gzip.decompress(blob).decode("utf-8")).splitlines()
    text = "".join(json.dumps(_clip_line(json.loads(line)), ensure_ascii=False, separators=(",", ":")) + "\n"
                   for line in lines if line.strip())
    write_bytes_atomic(sidecar(record), gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0))


def read(record: Path) -> list[dict[str, Any]]:
    """The transcripts kept beside ``record`` ([] when it has none). A damaged sidecar is a
    ConfigError naming it: a viewer must not show half of a file as if it were all of it."""
    from evoharness.compiler.errors import ConfigError

    path = sidecar(record)
    if not path.exists():
        return []
    fix = "delete it; the next evaluation of the variant writes it again"
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read(MAX_SIDECAR_BYTES + 1)
        if len(data) > MAX_SIDECAR_BYTES:
            raise ConfigError(str(path), f"holds more than {MAX_SIDECAR_BYTES >> 20} MiB of transcripts", fix)
        lines = [checked("transcript", json.loads(line), path) for line in data.decode("utf-8").splitlines() if line.strip()]
    except ConfigError:
        raise
    except (OSError, EOFError, ValueError, RecursionError) as exc:  # gzip.BadGzipFile is an OSError
        raise ConfigError(str(path), f"is not a transcripts file ({type(exc).__name__}: {exc})", fix) from None
    for line in lines:
        if not (isinstance(line.get("task_id"), str) and type(line.get("sample")) is int and isinstance(line.get("messages"), list)
                and all(isinstance(m, dict) for m in line["messages"])):
            raise ConfigError(str(path), "holds a line that is not an episode's transcript (task_id, sample and messages)", fix)
    return lines


def concatenated(blobs: Sequence[bytes]) -> bytes:
    """The sidecar of an evaluation made of these blocks (gzip members concatenate)."""
    return b"".join(blobs)
