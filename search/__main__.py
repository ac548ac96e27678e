"""`python -m search [overrides]` is `evoharness search [overrides]`."""
import sys

from search.cli.main import main

sys.exit(main(["search", *sys.argv[1:]]))
