"""When too much of a run was skipped for its figures to stand for the split.

A skipped episode (an outage that outlived its retries) is never scored, so the metrics are over
the rest. Skips are rarely random: the long episodes time out, the rate limit hits the busy
minutes. Above a tenth of the episodes missing, a difference of the size a claim's margin is about
(0.05) can hide entirely in what was not scored, so by default the run is reported as failed.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from evoharness.compiler.errors import ConfigError
from evoharness.search.evaluation.episode import EpisodeResult

DEFAULT_MAX_SKIP_RATE = 0.1


def check_max_skip_rate(value: object, *, path: str = "workload.max_skip_rate") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ConfigError(path, f"{value!r} is not a fraction of episodes",
                          "use a number from 0 (no skipped episode allowed) to 1 (a run may skip every episode)")
    return float(value)


def too_many_skipped(episodes: Sequence[EpisodeResult], max_skip_rate: float) -> str | None:
    """Why the run failed (how many were skipped, and the most common reason), or None."""
    skipped = [e for e in episodes if not e.scored]
    if not episodes or not skipped or len(skipped) / len(episodes) <= max_skip_rate:
        return None
    reasons = Counter(_first_line(e.infra_error) for e in skipped)
    reason, count = reasons.most_common(1)[0]
    return (f"{len(skipped)} of {len(episodes)} episodes were skipped (more than max_skip_rate={max_skip_rate:g}); "
            f"most common ({count}): {reason}")


def _first_line(text: str | None) -> str:
    lines = (text or "episode was not scored").strip().splitlines()
    return lines[0][:300] if lines else "episode was not scored"
