"""Shared helpers for the bench scripts: the base BFCL agent config, model configs, a table printer,
and the process's resident set size. Not a benchmark itself."""
from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

from omegaconf import DictConfig, OmegaConf  # noqa: E402


def figure(name: str, value: object, target: object, met: object, **extra: object) -> None:
    """One bench figure: a JSON line with ``figure``, ``value``, ``target`` and ``met`` first."""
    import json

    print(json.dumps({"figure": name, "value": value, "target": target, "met": met, **extra}), flush=True)

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "evoharness" / "conf"
TOOL: dict[str, Any] = {"source": "bfcl"}


def base_agent() -> dict[str, Any]:
    """conf/agent/bfcl_agent.yaml as a plain mapping (json format; understand, act, report)."""
    raw = OmegaConf.load(CONF / "agent" / "bfcl_agent.yaml")
    assert isinstance(raw, DictConfig)
    raw.pop("defaults", None)
    return OmegaConf.to_container(raw, resolve=True)  # type: ignore[return-value]


VERIFY_STEP = {"name": "verify", "instructions": "Before your final answer, check each tool result of this request against what "
               "was asked; if a call failed or used a wrong value, call it again correctly.", "after": ["act"], "optional": True,
               "enabled": False, "trigger": "before_final"}


def agent_with_verify() -> dict[str, Any]:
    """The base agent with an optional verify step (off): the known switch the benchmarks that
    enumerate a space or build a yardstick from the model card turn on and off."""
    agent = base_agent()
    agent["workflow"] = [*agent["workflow"], dict(VERIFY_STEP)]
    return agent


def model_config(name: str) -> dict[str, Any]:
    """conf/model/<name>.yaml merged onto the ModelConfig schema."""
    from evoharness.search.optimise.models_conf import load_model_config

    return load_model_config(name, [CONF])


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A small left-aligned plain-text table."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def rss_mib() -> float:
    """Current resident set size (VmRSS) in MiB; falls back to the peak from getrusage."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: ...`` then ``t[0]`` is the wall time in seconds."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


def same_metrics(a: Mapping[str, float], b: Mapping[str, float], *, ignore: Sequence[str] = ("latency_p50", "latency_p95")) -> bool:
    """Equal metric maps apart from measured wall-time metrics."""
    keys = (set(a) | set(b)) - set(ignore)
    return all(a.get(k) == b.get(k) for k in keys)
