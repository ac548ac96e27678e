"""`python -m compiler [overrides]` is `evoharness compile [overrides]`."""
import sys

from compiler.cli import main

sys.exit(main())
