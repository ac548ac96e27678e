"""The evoharness command line: the entry point and its subcommands (the top layer)."""
