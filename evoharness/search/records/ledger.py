"""The ledger: one JSON line per candidate with genome, authors, diff against baseline,
metrics per split, what evaluating it cost, and the decision taken on it."""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evoharness.compiler.atomic import write_text_atomic
from evoharness.compiler.variant import HarnessVariant


def variant_text(variant: HarnessVariant) -> list[str]:
    """What the model sees, as diffable lines: system prompt, tools, injected steps, params."""
    lines = ["# system prompt", *variant.system_prompt.splitlines()]
    # one line per native tool keeps a format change from drowning the diff (text-format tools
    # are already in the system prompt)
    lines += ["# native tools", *[json.dumps(t, sort_keys=True) for t in variant.native_tools_for(None)]]
    lines += ["# step messages", *[m for _, m in variant.step_messages("before_final")]]
    lines += ["# model", json.dumps(variant.model.to_dict(), sort_keys=True), f"tool_format: {variant.tool_format}",
              f"max_turns: {variant.max_turns}"]
    return lines


def unified_diff(baseline: HarnessVariant, candidate: HarnessVariant, *, context: int = 2) -> str:
    if baseline.content_hash == candidate.content_hash:
        return ""
    return "\n".join(
        difflib.unified_diff(variant_text(baseline), variant_text(candidate), fromfile=f"baseline {baseline.content_hash[:12]}",
                             tofile=f"candidate {candidate.content_hash[:12]}", lineterm="", n=context)
    )


def write_ledger(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Rewritten whole (atomically) from the study's records, so a resumed run never duplicates lines."""
    return write_text_atomic(path, "".join(json.dumps(dict(r), sort_keys=True, default=str) + "\n" for r in rows))

