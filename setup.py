"""The repository's folders install under one import root: compiler/ is evoharness.compiler,
search/ is evoharness.search and conf/ is evoharness.conf, so nothing installed clashes with a
user's own ``conf/`` or ``search.py``. Everything else is in pyproject.toml."""
from setuptools import find_namespace_packages, setup

FOLDERS = {"evoharness": "evoharness", "evoharness.compiler": "compiler", "evoharness.search": "search",
           "evoharness.conf": "conf"}


def packages() -> list[str]:
    found = [*FOLDERS, *find_namespace_packages(include=["hydra_plugins.*"])]
    for root, folder in FOLDERS.items():
        found += [f"{root}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])]
    return found


setup(package_dir=FOLDERS, packages=packages())
