"""What a job needs before its first model call, imported once by the preloaded launcher's fork
server (hydra_plugins/evoharness_parallel): each worker forked from it starts with litellm imported
and set up and the evaluation's modules loaded. Nothing else imports this module: elsewhere litellm
stays lazy, so a warm run answered from the cache never pays for it."""
from __future__ import annotations

import search.evaluation.evaluate  # noqa: F401  # a job's first evaluation imports it
import search.optimise.trial  # noqa: F401  # the job's own code, and the compiler under it
from compiler.runtime.llm import litellm_module

try:
    litellm_module()
except Exception:  # raised here it would kill the server, and every worker with it: each worker meets it on its own call
    pass
