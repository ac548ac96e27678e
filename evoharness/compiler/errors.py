"""The one error type for bad input: it names the config path, the bad value and the fix."""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class ConfigError(ValueError):
    """Bad configuration or override. Rendered as a single line; the CLI exits with code 2.

    Args:
        path: The config path of the bad value, e.g. ``workload.options.path``.
        problem: What is wrong with it.
        fix: How to fix it.
    """

    def __init__(self, path: str, problem: str, fix: str) -> None:
        self.path = path
        self.problem = problem
        self.fix = fix
        super().__init__(self.one_line())

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str, str]]:
        # a job's error crosses a process (joblib, Ray, Submitit) as a pickle
        return (type(self), (self.path, self.problem, self.fix))

    def one_line(self) -> str:
        return f"{self.path}: {self.problem.rstrip('.')}. Fix: {self.fix}"


class RouteRefused(ConfigError):
    """A route's provider refused a call in a way every call would repeat (a key, a model name, a
    parameter): bad input no check could see before calling. A run stops with its one line; in a
    multirun it fails its own job, so the sweep's other jobs and its comparison are kept."""


class RunFailed(Exception):
    """A run that did its work and kept its record, yet failed (too many of its episodes were skipped):
    one ``error:`` line and exit code 1 on the command line, the job's failure in a multirun (the
    sweep's other jobs and its comparison are kept), this exception from the Python API, with the
    run's ``result`` (its report) attached."""

    def __init__(self, message: str, *, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class OneLineParser(argparse.ArgumentParser):
    """argparse reports a bad flag as usage plus an error over several lines; here it is one line, exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}. Fix: see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(2)
