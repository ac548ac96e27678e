"""README's Layout section is the map of the code: it names every module and package of the one
import root (evoharness/ and its compiler/ and search/). A module added without a line there fails here."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evoharness",)


def layout_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    assert blocks, "README's Layout section has no code block"
    return "\n".join(blocks)


def modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if "__pycache__" in path.parts:
                continue
            if path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
                found.append(path)
            elif path.is_dir() and (path / "__init__.py").exists():
                found.append(path)
    return found


def unnamed(block: str, paths: list[Path]) -> list[str]:
    """The modules and packages among ``paths`` whose name is not a word of ``block``."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", block))
    return [str(p.relative_to(ROOT)) for p in paths if p.stem not in words]


def test_layout_names_every_module() -> None:
    missing = unnamed(layout_block(), modules())
    assert not missing, f"README.md's Layout section does not name: {missing}"


def test_a_module_the_layout_leaves_out_is_reported() -> None:
    paths = [ROOT / "evoharness/compiler/schema.py", ROOT / "evoharness/compiler/ghost.py", ROOT / "evoharness/search/optimise"]
    assert unnamed("compiler/  schema\nsearch/ optimise/", paths) == ["evoharness/compiler/ghost.py"]
