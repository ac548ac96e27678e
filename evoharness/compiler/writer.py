"""Thin I/O: write a compiled variant to disk atomically, read one back with its hash checked."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from evoharness.compiler.secrets import scrub
from evoharness.compiler.variant import HarnessVariant

VARIANT_FILE = "variant.json"


def _dump(path: Path, data: object) -> None:
    path.write_text(scrub(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"), encoding="utf-8")


def write_variant(variant: HarnessVariant, root: str | Path) -> Path:
    """Write ``root/<hash>/`` with variant.json, system_prompt.md, tools.json, workflow.json.

    Idempotent (an existing complete variant is left as is) and atomic: the files are written
    to a temp dir beside the target and renamed into place, so a crash leaves no half variant.
    """
    root = Path(root)
    final = root / variant.content_hash
    if (final / VARIANT_FILE).exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{variant.content_hash[:12]}-", dir=root))
    try:
        _dump(tmp / VARIANT_FILE, variant.to_dict())
        (tmp / "system_prompt.md").write_text(scrub(variant.system_prompt), encoding="utf-8")
        _dump(tmp / "tools.json", {"tool_format": variant.tool_format, "native": variant.native_tools_for(None),
                                   "bash_usage": {t.name: t.usage for t in variant.tools}})
        _dump(tmp / "workflow.json", {"steps": [s.to_dict() for s in variant.workflow],
                                      "edges": [[a, s.name] for s in variant.workflow for a in s.after]})
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / VARIANT_FILE).exists():  # a concurrent writer won the race: same bytes
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
