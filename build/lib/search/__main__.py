"""`python -m search [overrides]` is `evoharness search [overrides]`."""
import sys

from search.cli import main

sys.exit(main(["search", *sys.argv[1:]]))
