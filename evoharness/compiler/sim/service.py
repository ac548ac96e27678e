"""One request end to end, shared by the litellm provider and the HTTP server: simulate, decide
the fault for this attempt, pick the rendering, compute the sleep."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evoharness.compiler.sim.engine import SimRequest, SimResult, simulate
from evoharness.compiler.sim.faults import FaultKind, decide_fault, next_attempt, sim_config, with_overrides
from evoharness.compiler.sim.gold import GoldSource
from evoharness.compiler.sim.render import Rendered, render_fault
from evoharness.compiler.sim.surface import surface_for
from evoharness.compiler.sim.tiers import tier_for

PROCESSING_HEADER = "openai-processing-ms"  # how the simulator reports its latency, as OpenAI reports processing time


@dataclass(frozen=True)
class SimOutcome:
    result: SimResult
    fault: FaultKind | None  # timeout / server_error / rate_limit raise; malformed is rendered
    rendered: Rendered  # what to send back when the fault does not raise
    delay_s: float  # simulated latency x the route's time_scale
    attempt: int


def run_request(request: SimRequest, gold: GoldSource,
                sim_faults: Mapping[str, Any] | None = None) -> SimOutcome:
    """``sim_faults``: per-request knob overrides (the request's ``sim_faults`` parameter)."""
    config = with_overrides(sim_config(f"sim/{tier_for(request.model).name}"), sim_faults)
    result = simulate(request, gold, shared_draws=config.shared_draws, world=config.world,
                      surface=surface_for(config.surface, config.surface_seed))
    attempt = result.meta.attempt if result.meta.attempt is not None else next_attempt(result.digest)
    fault = decide_fault(config, result.digest, attempt)
    rendered = render_fault(result.rendered) if fault == "malformed" else result.rendered
    return SimOutcome(result, fault, rendered, result.latency_s * config.time_scale, attempt)
