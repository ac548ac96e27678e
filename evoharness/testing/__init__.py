"""Contract suites a plugin runs in its own tests: subclass ``WorkloadContract`` or
``MutatorContract`` in a test module and name the entry to check (docs/workloads.md, "Testing a
plugin"). Needs pytest (``pip install evoharness[testing]``); nothing else in evoharness imports
this package.
"""
import pytest

# pytest rewrites only the assertions of modules it is told about before they are imported:
# then a failing contract check shows the values it compared.
pytest.register_assert_rewrite("evoharness.testing.workload_contract", "evoharness.testing.mutator_contract")

from evoharness.testing.mutation_case import MutationCase, order_desk_case  # noqa: E402
from evoharness.testing.mutator_contract import MutatorContract  # noqa: E402
from evoharness.testing.workload_contract import WorkloadContract, replay  # noqa: E402

__all__ = ["WorkloadContract", "MutatorContract", "MutationCase", "order_desk_case", "replay"]
