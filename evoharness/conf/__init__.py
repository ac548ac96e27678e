"""The Hydra config groups, shipped as a package so every install finds them."""
from __future__ import annotations

from pathlib import Path

CONF_DIR = str(Path(__file__).resolve().parent)
