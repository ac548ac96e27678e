"""`python -m evoharness <command> [overrides]` is `evoharness <command> [overrides]`."""
from evoharness.search.cli.main import entry

entry()
