"""`python -m evoharness.compiler [overrides]` is `evoharness compile [overrides]`."""
import sys

from evoharness.compiler.cli import main

sys.exit(main())
