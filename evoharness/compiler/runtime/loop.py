"""The harness runtime: one multi-turn tool-calling episode of a compiled variant.

Models are reached only through litellm (via ModelClient). Tool calls, native or written as text,
are dispatched by name to the environment; nothing the model writes is evaluated or run.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.runtime.arguments import MAX_REPLY_CHARS, clip, decode_json_arguments, echoed_arguments, schema_mismatch
from evoharness.compiler.runtime.bash_calls import decode_text_calls
from evoharness.compiler.runtime.models import InfraError, ModelClient, ModelLimitError
from evoharness.compiler.runtime.reply import ModelReply
from evoharness.compiler.runtime.tool_outputs import ToolInfraError
from evoharness.compiler.runtime.trajectory import ModelCallRecord, ToolCall, ToolCallRecord, Trajectory
from evoharness.compiler.runtime.workload import Environment, Task
from evoharness.compiler.variant import HarnessVariant


def episode_user(task: Task) -> str:
    """The `user` field, sent only on routes that opt in (model.send_episode_id): the task, nothing
    about the sample, which every route learns from the request's `seed` alone."""
    return f"task_id={task.task_id}"


def episode_seed(task: Task, sample: int, seed: int) -> int:
    """OpenAI's `seed` for every request of one sample: the run seed, the task and the sample. Two
    samples of a task are two requests (never one cached reply replayed), and a provider that honours
    `seed` answers each reproducibly. 31 bits: the range every provider that takes a seed accepts."""
    digest = hashlib.sha256(f"{seed}\x1f{task.task_id}\x1f{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


MODEL_LIMIT = "[model limit: "  # how a turn the model's window cut short is answered in the trajectory


def tool_result_block(name: str, content: str) -> str:
    return f'<tool_result name="{name}">\n{content}\n</tool_result>'


class _Episode:
    def __init__(self, variant: HarnessVariant, task: Task, env: Environment, client: ModelClient, sample: int, seed: int,
                 strong: ModelClient | None = None) -> None:
        self.v, self.task, self.env, self.client, self.strong = variant, task, env, client, strong
        self.escalated = False  # the rest of this user turn goes to the escalation route
        self.escalations: list[tuple[int, str]] = []  # (turn, trigger) of each handover
        self.sample, self.seed = sample, seed
        self.specs = {t.name: t.spec for t in variant.tools}
        self.offered: list[str] = [n for n in task.tool_names if n in self.specs]
        self.shown: list[str] = list(self.offered)  # the tools this turn offers (all, unless the context policy narrows them)
        self.messages: list[dict[str, Any]] = []
        self.model_calls: list[ModelCallRecord] = []
        self.tool_calls: list[ToolCallRecord] = []
        self.responses: list[str] = []
        self._tools_chars: dict[tuple[str, ...], int] = {}
        # where each tool call's result sits in the conversation: (message index, block index for a
        # text-format message of result blocks, else None), for the verbatim window to compact it
        self._placed: dict[int, tuple[int, int | None]] = {}
        self._blocks: dict[int, list[str]] = {}
        # what later calls are sent in place of a message the window compacted; the conversation
        # itself (the trajectory's record) keeps each message as it was first sent
        self._later: dict[int, str] = {}

    def _offer(self, names: tuple[str, ...], said: str = "") -> None:
        """Offer the turn its tools: the task's, with ``names`` added, narrowed by the context
        policy to those the turn's user messages (``said``) point at and those the episode called."""
        self.offered += [n for n in names if n in self.specs and n not in self.offered]
        if self.v.context.tools_per_turn is None:  # every tool on every call: nothing to choose
            self.shown = list(self.offered)
        else:
            called = list(dict.fromkeys([c.name for c in self.tool_calls if c.name in self.specs] + [n for n in names if n in self.specs]))
            self.shown = self.v.context.turn_tools(self.offered, {n: self.specs[n].description for n in self.offered}, said, called)
        system = {"role": "system", "content": self.v.system_prompt_for(self.shown)}
        if self.messages:
            self.messages[0] = system  # text-format tools live in the system prompt
        else:
            self.messages.append(system)

    def _run_tool(self, turn: int, call: ToolCall, place: tuple[int, int | None]) -> tuple[str | None, str | None]:
        """(the result as the model is sent it, the error sent instead); ``place`` is where the
        conversation will hold it."""
        result: str | None = None
        if call.name not in self.offered:
            error: str | None = f"unknown tool {clip(repr(call.name), 200)}; available: {', '.join(self.offered)}"
        elif (mismatch := schema_mismatch(self.specs[call.name], call.arguments)) is not None:
            error = mismatch  # the backend never sees arguments its schema refuses
        else:
            try:
                result, error = self.env.call(call.name, dict(call.arguments)), None
            except ToolInfraError as exc:  # a live service down, a snapshot miss: the episode is skipped, never scored
                raise InfraError(f"tool {call.name}: {exc}") from None
            except ConfigError:  # the setup is wrong (a replay the snapshot cannot serve): the run stops with one line
                raise
            except Exception as exc:  # the tool's own failure goes back to the model, as a real tool error would
                error = clip(f"{type(exc).__name__}: {exc}")
        sent, cut = self.v.context.clip(call.name, str(result)) if result is not None else (None, 0)
        self._placed[len(self.tool_calls)] = place
        self.tool_calls.append(ToolCallRecord(turn=turn, name=call.name, arguments=dict(call.arguments), result=result, error=error,
                                              cut=cut))
        return sent, error

    def _compact(self, turn: int) -> None:
        """Compact the results of the turns that leave the verbatim window as ``turn`` starts."""
        keep = self.v.context.keep_turns
        if keep is None:
            return
        for i, rec in enumerate(self.tool_calls):
            if rec.compacted or rec.result is None or rec.turn > turn - keep:
                continue
            done = self.v.context.compact(str(rec.result), rec.cut)
            if done is None:
                continue
            text, cut = done
            self.tool_calls[i] = replace(rec, compacted=cut)
            at, block = self._placed[i]
            if block is None:
                self._later[at] = text
            else:
                self._blocks[at][block] = tool_result_block(rec.name, text)
                self._later[at] = "\n".join(self._blocks[at])

    def _request(self) -> list[dict[str, Any]]:
        """The conversation as the next call is sent it: compacted messages in their later form."""
        if not self._later:
            return self.messages
        return [{**m, "content": self._later[i]} if i in self._later else m for i, m in enumerate(self.messages)]

    def _decode_native(self, reply: ModelReply) -> list[tuple[str, ToolCall | None, str | None]]:
        out: list[tuple[str, ToolCall | None, str | None]] = []
        for nc in reply.tool_calls:
            args, error = decode_json_arguments(clip(nc.name, 200), nc.arguments)
            out.append((nc.id, ToolCall(nc.name, args) if args is not None else None, error))
        return out

    def _sent_chars(self, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> tuple[int, int, int, int]:
        """What the request about to be sent (``messages``, ``tools``) holds, by part, in characters:
        the system prompt, the tool schemas, the tool results, and the rest of the conversation."""
        key = tuple(self.shown)
        if key not in self._tools_chars:  # the same schemas go with every call that offers the same tools
            self._tools_chars[key] = len(json.dumps(tools)) if tools else 0
        results = rest = 0
        for m in messages[1:]:
            size = len(str(m.get("content") or "")) + sum(len(str(c.get("function", {}).get("arguments", "")))
                                                          for c in m.get("tool_calls") or ())
            if m.get("role") == "tool" or str(m.get("content") or "").startswith('<tool_result name="'):
                results += size
            else:
                rest += size
        system = len(str(messages[0].get("content") or ""))
        body = min(system, len(self.v.prompt_body))  # text-format tools ride in the system prompt: they count as tools
        return body, self._tools_chars[key] + system - body, results, rest

    async def _step(self, turn: int) -> bool:
        """One model call and its tool calls. Returns True when the model gave a final answer."""
        tools = self.v.native_tools_for(self.shown)
        request = self._request()
        sent = self._sent_chars(tools, request)
        client = self.strong if self.escalated and self.strong is not None else self.client
        reply = await client.complete(request, tools=tools, user=episode_user(self.task),
                                           seed=episode_seed(self.task, self.sample, self.seed))
        if reply.unparseable:
            return self._unparseable(turn, reply, sent, escalated=client is not self.client)
        native = self._decode_native(reply) if self.v.tool_format != "bash" else []
        content = reply.content or ""
        text = (decode_text_calls(content[:MAX_REPLY_CHARS], {n: self.specs[n] for n in self.offered})
                if self.v.tool_format != "json" and not native else None)
        parse_errors = [e for _, _, e in native if e] + (list(text.errors) if text else [])
        if len(content) > MAX_REPLY_CHARS:
            parse_errors.insert(0, f"the reply's text is {len(content)} characters long; the limit is {MAX_REPLY_CHARS}, "
                                   "so only its start was kept and read (write shorter replies)")
        self.model_calls.append(
            ModelCallRecord(
                turn=turn, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd,
                latency_s=reply.latency_s, finish_reason=reply.finish_reason, parse_error="; ".join(parse_errors) or None,
                cached=reply.cached, attempts=0 if reply.cached else reply.attempts, infra_s=0.0 if reply.cached else reply.infra_s,
                latency_source=reply.latency_source, request_key=reply.key, sent_chars=sent, escalated=client is not self.client,
                input_cost_usd=reply.input_cost_usd, cached_prompt_tokens=reply.cached_prompt_tokens,
            )
        )
        # every later request of the episode carries this message: an oversized reply is kept clipped, with a
        # marker saying how much was cut, and a call's arguments only as a parser can take them
        assistant: dict[str, Any] = {"role": "assistant", "content": clip(content, MAX_REPLY_CHARS)}
        if native:
            assistant["tool_calls"] = [{"id": i, "type": "function",
                                        "function": {"name": nc.name, "arguments": echoed_arguments(nc.arguments, call is not None)}}
                                       for (i, call, _), nc in zip(native, reply.tool_calls)]
        self.messages.append(assistant)
        if native:
            for call_id, call, error in native:
                if call is not None:
                    result, error = self._run_tool(turn, call, (len(self.messages), None))
                content = f"Error: {error}" if error else str(result)
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
                if error:
                    self._escalate(turn, "tool_error")
            return False
        if text is not None and (text.calls or text.errors):
            blocks: list[str] = []
            for call in text.calls:
                result, error = self._run_tool(turn, call, (len(self.messages), len(blocks)))
                blocks.append(tool_result_block(call.name, f"Error: {error}" if error else str(result)))
                if error:
                    self._escalate(turn, "tool_error")
            blocks += [tool_result_block("parse_error", f"Error: {e}") for e in text.errors]
            if text.errors:
                self._escalate(turn, "tool_error")
            self._blocks[len(self.messages)] = blocks
            self.messages.append({"role": "user", "content": "\n".join(blocks)})
            return False
        return True

    def _escalate(self, turn: int, trigger: str) -> bool:
        """Hand the rest of the turn to the escalation route when ``trigger`` is one of its triggers
        (once per turn). Returns whether this call handed it over."""
        if self.escalated or self.strong is None or self.v.escalation is None or trigger not in self.v.escalation.on:
            return False
        self.escalated = True
        self.escalations.append((turn, trigger))
        return True

    def _handed_without_a_call(self, turn: int) -> bool:
        """The turn was handed over on its last allowed call: the stronger route has made none yet."""
        return self.escalated and not any(c.escalated and c.turn == turn for c in self.model_calls)

    def _unparseable(self, turn: int, reply: ModelReply, sent: tuple[int, int, int, int], *, escalated: bool) -> bool:
        """A reply nobody can read costs the model its turn, as a malformed call would; it is told and tries again."""
        self.model_calls.append(ModelCallRecord(
            turn=turn, prompt_tokens=0, completion_tokens=0, cost_usd=reply.cost_usd, latency_s=reply.latency_s,
            finish_reason=reply.finish_reason, parse_error=reply.unparseable, cached=reply.cached,
            attempts=0 if reply.cached else reply.attempts, infra_s=0.0 if reply.cached else reply.infra_s, request_key=reply.key,
            sent_chars=sent, escalated=escalated, input_cost_usd=reply.input_cost_usd,
        ))
        self.messages.append({"role": "assistant", "content": ""})
        self.messages.append({"role": "user", "content": f"Error: your last reply could not be read ({reply.unparseable}). "
                                                         "Reply again: plain text, or well-formed tool calls."})
        self._escalate(turn, "tool_error")  # sent back as an error, like a call the parser refused
        return False

    async def run(self) -> Trajectory:
        self._offer(())
        status = "completed"
        infra: str | None = None
        lost: InfraError | None = None
        try:
            for turn, user_messages in enumerate(self.task.turns):
                self._offer(tuple(self.task.added_tools.get(turn, ())),
                            " ".join(str(m.get("content") or "") for m in user_messages))
                self._compact(turn)
                self.messages.extend(dict(m) for m in user_messages)
                pending = list(self.v.step_messages("before_final"))
                answer, finished = "", False
                self.escalated = False  # every turn starts on the variant's own model
                left = self.v.max_turns
                while left > 0:
                    left -= 1
                    if await self._step(turn):
                        # Steps like verify are sent once, and only when the turn did something to check.
                        if pending and any(c.turn == turn for c in self.tool_calls):
                            self.messages.append({"role": "user", "content": pending.pop(0)[1]})
                            self._escalate(turn, "review")
                        else:
                            answer, finished = str(self.messages[-1].get("content") or ""), True
                            break
                    if left == 0 and (self._escalate(turn, "max_turns") or self._handed_without_a_call(turn)):
                        left = self.v.max_turns  # the stronger model gets a turn's budget of its own
                if not finished:
                    status = "max_turns"
                self.responses.append(answer)
                self.env.end_turn(turn)
        except InfraError as exc:
            status, infra, lost = "infra_error", str(exc), exc
        except ModelLimitError as exc:
            # The harness outgrew the model's window: a scored failure. The turns it never reached
            # are closed empty so the scorer sees what was actually done.
            status = "max_turns"
            self.responses.append(f"{MODEL_LIMIT}{exc}]")
            for turn in range(len(self.responses) - 1, len(self.task.turns)):
                self.env.end_turn(turn)
        return Trajectory(
            task_id=self.task.task_id, sample=self.sample, seed=self.seed, variant_hash=self.v.content_hash, status=status,  # type: ignore[arg-type]
            model_calls=tuple(self.model_calls), tool_calls=tuple(self.tool_calls), responses=tuple(self.responses),
            infra_error=infra, final_state=_jsonable(self.env.snapshot()),
            lost_attempts=lost.attempts if lost else 0, lost_infra_s=lost.infra_s if lost else 0.0, messages=tuple(self.messages),
            escalations=tuple(self.escalations),
        )


def _jsonable(state: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state, default=str))


async def run_episode(
    variant: HarnessVariant, task: Task, environment: Environment, *, sample: int = 0, seed: int = 0, client: ModelClient | None = None,
    escalate_to: ModelClient | None = None,
) -> Trajectory:
    """Play every user turn of ``task`` against ``environment``; never raises for model or tool faults.

    Pass a shared ``client`` (and ``escalate_to``, for a variant that escalates) to hold a route's
    concurrency limit (and response cache) across episodes.
    """
    client = client or ModelClient(variant.model, variant.route)
    if escalate_to is None and variant.escalation is not None:
        escalate_to = ModelClient(variant.escalation.model, variant.escalation.route)
    return await _Episode(variant, task, environment, client, sample, seed, escalate_to).run()
