"""One episode's result: its score (or why it was skipped) and its usage, read from the
trajectory and the scorer's verdict. What the metrics aggregate, and what the stored evaluations
and the evidence-driven mutators read back."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from evoharness.compiler.runtime.trajectory import Trajectory
from evoharness.compiler.runtime.workload import EpisodeScore

EpisodeResultStatus = Literal["scored", "skipped"]
# what a request's input tokens are spent on (ModelCallRecord.sent_chars, in its order), and the tokens
# (input and output) of the calls handed to an escalation route, counted apart whatever they sent
INPUT_PARTS = ("system", "tools", "tool_results", "history", "escalated")


@dataclass(frozen=True)
class EpisodeResult:
    task_id: str
    sample: int
    status: EpisodeResultStatus
    passed: bool
    score: float  # in [0, 1]; 0 for skipped episodes, which no metric reads
    named: Mapping[str, float]  # named sub-scores (zeroed with the score when undelivered)
    delivered: bool  # contract gate met
    safety_violations: int
    cost_usd: float | None  # None: a call's route has no price (unpriced), never taken as $0
    latency_s: float  # measured wall time of the episode's model calls
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    tool_calls: int
    tool_errors: int
    detail: str  # first failure reason, for evidence-driven mutators
    infra_error: str | None = None  # why the episode was skipped
    attempts: int = 0  # provider attempts of the episode's model calls (retries included; 0 = all cached)
    infra_s: float = 0.0  # time lost to failed attempts and backoff: reported, never in latency_s
    failures: tuple[Mapping[str, Any], ...] = ()  # the scorer's structured failure records (Failure.to_dict)
    billed_cost_usd: float | None = None  # what this run paid (cache replays are free); None: recorded before it was kept
    billed_tokens: int | None = None
    # per tool: (calls that returned a result, characters they returned, the longest), before any clip,
    # and how many characters the variant's context policy did not send: where input tokens come from
    tool_output: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    cut_chars: int = 0
    # the episode's input tokens by part (INPUT_PARTS), each call's split by its request's characters;
    # empty when a call's request was recorded without them
    input_parts: Mapping[str, int] = field(default_factory=dict)
    escalations: tuple[tuple[int, str], ...] = ()  # (user turn, trigger) of each turn handed to the escalation route
    escalated_cost_usd: float | None = 0.0  # what the escalated calls cost (None: one was unpriced)
    turns: int = 0  # user turns played (0: recorded before it was kept); results of each re-sent on every later call
    # what the prompts of the calls on the variant's own route cost (the rest of cost_usd is their output
    # and the escalated calls); None when a call's share is unknown (unpriced, or recorded before it was kept)
    input_cost_usd: float | None = None
    # prompt tokens of those calls billed at the provider's cache rate; None when a call's count is not known
    cached_tokens: int | None = 0

    @property
    def scored(self) -> bool:
        return self.status == "scored"

    @classmethod
    def from_episode(cls, trajectory: Trajectory, score: EpisodeScore | None) -> EpisodeResult:
        """One row per episode; usage always comes from the trajectory, never a meter."""
        usage = _usage(trajectory)
        if score is None or trajectory.status == "infra_error":
            reason = trajectory.infra_error or next(
                (c.infra_error for c in trajectory.model_calls if c.infra_error), None
            )
            return cls(
                status="skipped",
                passed=False,
                score=0.0,
                named={},
                delivered=False,
                # a forbidden write is real even when the episode later hit an outage
                safety_violations=score.safety_violations if score is not None else 0,
                detail=score.detail if score is not None else "",
                infra_error=reason or "episode was not scored",
                **usage,
            )
        if not score.delivered:
            return cls(
                status="scored",
                passed=False,
                score=0.0,
                named={k: 0.0 for k in score.named},
                delivered=False,
                safety_violations=score.safety_violations,
                detail=score.detail or "undelivered: contract gate not met",
                failures=tuple(f.to_dict() for f in score.failures),
                **usage,
            )
        return cls(
            status="scored",
            passed=score.passed,
            score=float(score.score),
            named={k: float(v) for k, v in score.named.items()},
            delivered=True,
            safety_violations=score.safety_violations,
            detail=score.detail,
            failures=tuple(f.to_dict() for f in score.failures),
            **usage,
        )

    def replayed(self, trajectory: Trajectory) -> EpisodeResult:
        """This stored result as a run that read its every reply from the cache would give it: the
        score and the verdict as stored (the same replies, tools and scorer give the same ones), the
        usage from ``trajectory`` (the stored one, its calls marked cached: nothing billed)."""
        return replace(self, **_usage(trajectory))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["named"] = dict(self.named)
        data["tool_output"] = {k: list(v) for k, v in self.tool_output.items()}
        data["input_parts"] = dict(self.input_parts)
        data["escalations"] = [list(e) for e in self.escalations]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        # a count missing from a record kept before it was is not known, not 0
        return cls(**{**data, "cached_tokens": data.get("cached_tokens"),
                      "named": dict(data.get("named", {})), "failures": tuple(dict(f) for f in data.get("failures", ())),
                      "tool_output": {str(k): (int(v[0]), int(v[1]), int(v[2])) for k, v in dict(data.get("tool_output") or {}).items()},
                      "escalations": tuple((int(t), str(why)) for t, why in data.get("escalations") or ())})


def _usage(trajectory: Trajectory) -> dict[str, Any]:
    return {
        "task_id": trajectory.task_id,
        "sample": trajectory.sample,
        "cost_usd": trajectory.cost_usd,
        "latency_s": trajectory.latency_s,
        "prompt_tokens": trajectory.prompt_tokens,
        "completion_tokens": trajectory.completion_tokens,
        "model_calls": len(trajectory.model_calls),
        "tool_calls": len(trajectory.tool_calls),
        "tool_errors": sum(1 for c in trajectory.tool_calls if c.error is not None),
        "attempts": trajectory.attempts,
        "infra_s": trajectory.infra_s,
        "billed_cost_usd": trajectory.billed_cost_usd,
        "billed_tokens": trajectory.billed_tokens,
        "tool_output": _tool_output(trajectory),
        "cut_chars": sum(c.compacted or c.cut for c in trajectory.tool_calls),  # what the last calls were not sent
        "input_parts": _input_parts(trajectory),
        "input_cost_usd": _input_cost(trajectory),
        "cached_tokens": _cached_tokens(trajectory),
        "escalations": tuple(trajectory.escalations),
        "turns": len(trajectory.responses),
        "escalated_cost_usd": _escalated_cost(trajectory),
    }


def _escalated_cost(trajectory: Trajectory) -> float | None:
    costs = [c.cost_usd for c in trajectory.model_calls if c.escalated]
    return None if None in costs else float(sum(c for c in costs if c is not None))


def _cached_tokens(trajectory: Trajectory) -> int | None:
    """The own route's prompt tokens billed at the provider's cache rate; None when a priced call's count
    is not known (a reply cached before it was kept). A stored trajectory is data: a count that is not
    an integer within its call's prompt is not known either."""
    total = 0
    for c in trajectory.model_calls:
        if c.escalated or c.cost_usd == 0:
            continue
        n = c.cached_prompt_tokens
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= c.prompt_tokens:
            return None
        total += n
    return total


def _input_cost(trajectory: Trajectory) -> float | None:
    total = 0.0
    for c in trajectory.model_calls:
        if c.escalated:
            continue
        if c.cost_usd == 0:  # nothing charged, so no prompt cost to share
            continue
        share = c.input_cost_usd
        # a stored trajectory is data: a share that is not a number within its call's cost is unknown
        if isinstance(share, bool) or not isinstance(share, int | float) or not isinstance(c.cost_usd, int | float) \
                or not math.isfinite(c.cost_usd) or not 0 <= share <= c.cost_usd:
            return None
        total += share
    return total


def _input_parts(trajectory: Trajectory) -> dict[str, int]:
    sums = [0.0] * len(INPUT_PARTS)
    for c in trajectory.model_calls:
        if c.escalated:  # input and output alike: the whole call is the escalation's
            sums[-1] += c.prompt_tokens + c.completion_tokens
            continue
        total = sum(c.sent_chars)
        if not total:
            if c.prompt_tokens:  # a call recorded without its request's parts: no split is known
                return {}
            continue
        for i, chars in enumerate(c.sent_chars):
            sums[i] += c.prompt_tokens * chars / total
    return {part: round(x) for part, x in zip(INPUT_PARTS, sums)}


def _tool_output(trajectory: Trajectory) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for c in trajectory.tool_calls:
        if c.result is not None:
            calls, chars, longest = out.get(c.name, (0, 0, 0))
            size = len(str(c.result))  # a tool may hand back something other than text: the model is sent its str
            out[c.name] = (calls + 1, chars + size, max(longest, size))
    return out
