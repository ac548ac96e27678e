"""What a job needs before its first model call, imported once by the preloaded launcher's fork
server (hydra_plugins/evoharness_parallel): each worker forked from it starts with litellm imported
and set up and the evaluation's modules loaded. Nothing else imports this module: elsewhere litellm
stays lazy, so a warm run answered from the cache never pays for it.

Nothing here may raise: the server skips a preload module only on ImportError, and anything else
(or a Ctrl-C, which the server ignores only once its preload is done) would kill it and fail every
batch. A failure here is the worker's own to meet, on its own import or call."""
from __future__ import annotations

import signal
import threading

_main = threading.current_thread() is threading.main_thread()
_previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main else None
try:
    import evoharness.search.evaluation.evaluate  # noqa: F401  # a job's first evaluation imports it
    import evoharness.search.optimise.trial  # noqa: F401  # the job's own code, and the compiler under it
    from evoharness.compiler.runtime.llm import litellm_module

    litellm_module()
except Exception:
    pass
finally:
    if _main:
        signal.signal(signal.SIGINT, _previous)
