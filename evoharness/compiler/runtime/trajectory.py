"""What one episode leaves behind: every model call, every tool call, the final state."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

EpisodeStatus = Literal["completed", "max_turns", "infra_error"]


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for, decoded from native tool calls or from bash lines; also a
    task's reference call (``Task.gold``).

    Attributes:
        name: The tool's name.
        arguments: Its keyword arguments.
    """

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of an episode, as the model saw its outcome.

    Attributes:
        turn: The index of the user turn the call belongs to.
        name: The tool called.
        arguments: The arguments passed.
        result: The tool's output (None when the call failed); the model was sent it less ``cut``
            characters.
        error: The failure sent to the model instead (a raised exception, an unknown tool, bad
            arguments), or None.
        cut: Characters of the result the variant's context policy did not send in its own turn
            (0: sent whole).
        compacted: Characters of the result the calls of later turns were not sent, once its turn
            left the context policy's verbatim window (0: never compacted).
    """

    turn: int  # index of the user turn this call belongs to
    name: str
    arguments: Mapping[str, Any]
    result: str | None  # tool output (None when error); the model was sent it less `cut` characters
    error: str | None  # tool exception / unknown tool / bad arguments, as sent to the model
    cut: int = 0  # characters of the result the context policy did not send
    compacted: int = 0  # characters later turns were not sent, once its turn left the verbatim window


@dataclass(frozen=True)
class ModelCallRecord:
    turn: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the route has no price
    latency_s: float  # measured wall time of the successful attempt inside the provider
    finish_reason: str
    parse_error: str | None = None  # malformed tool call text (bash format) or bad JSON arguments
    infra_error: str | None = None  # timeout / 5xx / 429 / connection after retries
    cached: bool = False  # answered from the on-disk response cache
    attempts: int = 1  # provider attempts this call took (0 when answered from the cache)
    infra_s: float = 0.0  # failed attempts and backoff: reported apart, never part of latency_s
    latency_source: str = "client"  # "provider": its reported processing time; "client": our stopwatch
    request_key: str = ""  # the response-cache key of its request ("" without a cache)
    # characters of the request by part: system prompt, tool schemas, tool results, the rest of the
    # conversation (user turns, the model's own messages, workflow steps); all 0 in records made before
    sent_chars: tuple[int, int, int, int] = (0, 0, 0, 0)
    escalated: bool = False  # sent to the variant's escalation route (priced and timed as that route's)
    input_cost_usd: float | None = None  # the prompt's share of cost_usd (None: unknown)
    cached_prompt_tokens: int | None = 0  # of prompt_tokens, those billed at the provider's cache rate (None: not known)


@dataclass(frozen=True)
class Trajectory:
    """What one episode leaves behind; a scorer reads ``tool_calls``, ``responses`` and
    ``final_state``.

    Attributes:
        task_id: The task played.
        sample: The sample index of this episode of the task.
        seed: The environment's seed.
        variant_hash: The compiled agent's content hash.
        status: ``"completed"``, ``"max_turns"`` or ``"infra_error"``.
        model_calls: One ``ModelCallRecord`` per model call (tokens, cost, latency).
        tool_calls: One ``ToolCallRecord`` per tool call, in order.
        responses: The final assistant text of each user turn.
        infra_error: Why an ``infra_error`` episode stopped, or None.
        final_state: The environment's snapshot at the end.
        lost_attempts: Attempts of the model call that outlived its retries.
        lost_infra_s: The time those attempts took.
        messages: The conversation as the model was last sent it (system prompt, user turns,
            replies with their tool calls, tool results), with the episode's final reply last.
        escalations: (user turn, trigger) of each turn the variant handed to its escalation route.
    """

    task_id: str
    sample: int
    seed: int
    variant_hash: str
    status: EpisodeStatus
    model_calls: tuple[ModelCallRecord, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    responses: tuple[str, ...] = ()  # final assistant text per user turn
    infra_error: str | None = None
    final_state: Mapping[str, Any] = field(default_factory=dict)
    lost_attempts: int = 0  # attempts of the call that outlived its retries (an infra_error episode)
    lost_infra_s: float = 0.0  # and the time they took
    messages: tuple[Mapping[str, Any], ...] = ()
    escalations: tuple[tuple[int, str], ...] = ()  # (user turn, trigger) of each turn handed to the escalation route

    @property
    def cost_usd(self) -> float | None:
        """None when a call's price is unknown: a partial sum would be a cost that looks known and is low."""
        costs = [c.cost_usd for c in self.model_calls]
        return None if None in costs else sum(c for c in costs if c is not None)

    @property
    def billed_cost_usd(self) -> float | None:
        """What this run paid: calls answered from the response cache cost nothing again."""
        costs = [c.cost_usd for c in self.model_calls if not c.cached]
        return None if None in costs else sum(c for c in costs if c is not None)

    @property
    def billed_tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.model_calls if not c.cached)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.model_calls)

    @property
    def infra_s(self) -> float:
        return sum(c.infra_s for c in self.model_calls) + self.lost_infra_s

    @property
    def attempts(self) -> int:
        return sum(c.attempts for c in self.model_calls) + self.lost_attempts

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.model_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.model_calls)

    def calls_in_turn(self, turn: int) -> tuple[ToolCallRecord, ...]:
        return tuple(c for c in self.tool_calls if c.turn == turn)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trajectory:
        """The trajectory ``to_dict`` wrote. A key it does not know, or a missing one, is a TypeError
        or KeyError: a stored trajectory is read whole or not at all."""
        def build(kind: type[Any], row: Mapping[str, Any]) -> Any:
            unknown = set(row) - {f.name for f in fields(kind)}
            if unknown:
                raise TypeError(f"{kind.__name__} has no field {sorted(unknown)[0]!r}")
            return kind(**row)

        return build(cls, {**data, "model_calls": tuple(build(ModelCallRecord, _tupled(dict(c))) for c in data["model_calls"]),
                           "tool_calls": tuple(build(ToolCallRecord, dict(c)) for c in data["tool_calls"]),
                           "responses": tuple(data["responses"]), "final_state": dict(data["final_state"]),
                           "messages": tuple(dict(m) for m in data.get("messages", ())),
                           "escalations": tuple((int(t), str(why)) for t, why in data.get("escalations", ()))})


def _tupled(row: dict[str, Any]) -> dict[str, Any]:
    if "sent_chars" in row:  # JSON gives a list back
        row["sent_chars"] = tuple(int(x) for x in row["sent_chars"])
    return row
