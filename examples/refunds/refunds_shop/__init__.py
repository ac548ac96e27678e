"""An example of bringing your own agent without writing a Workload class: a tiny order desk.

Its tools are the functions below, its tasks a JSONL file, and its config dir the YAML beside
them. `evoharness evaluate --config-dir <this package>/conf workload=refunds agent=refunds_agent tool=refunds`
runs it (README.md, "Bring your own agent").
"""
from pathlib import Path

CONFIG_DIR = Path(__file__).parent / "conf"
TASKS = Path(__file__).parent / "tasks.jsonl"


def _register() -> None:
    from omegaconf import OmegaConf

    # conf/workload/refunds.yaml names the tasks file through this, wherever the package is installed
    OmegaConf.register_new_resolver("refunds_tasks", lambda: str(TASKS), replace=True)


_register()
