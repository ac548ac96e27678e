"""`python -m evoharness.search [overrides]` is `evoharness search [overrides]`."""
import sys

from evoharness.search.cli.main import main

sys.exit(main(["search", *sys.argv[1:]]))
