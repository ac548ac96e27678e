"""Model calls through litellm: timeout, retries with backoff, a concurrency limit per route,
infrastructure failures told apart from model mistakes, each reply costed by the route's billing.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from evoharness.compiler.errors import ConfigError, RouteRefused
from evoharness.compiler.model_extra import check_extra
from evoharness.compiler.provenance import package_version
from evoharness.compiler.route import MAX_BACKOFF_S, ModelParams, RouteSettings
from evoharness.compiler.runtime.billing import Billing
from evoharness.compiler.runtime.cache import ReplyCache, RequestKeyer, WriteBehind
from evoharness.compiler.runtime.llm import (
    ProviderCheckError,
    check_route,
    ensure_providers,
    first_line,
    litellm_module,
    missing_key,
    provider_cache_tag,
    provider_params,
    takes_seed,
)
from evoharness.compiler.runtime.reply import ModelReply, provider_latency, record_from_response, reply_from_record
from evoharness.compiler.secrets import remember_env

log = logging.getLogger(__name__)


class InfraError(Exception):
    """Timeout, 5xx, 429 or connection failure that outlived its retries: skip, never score 0."""

    def __init__(self, message: str, *, attempts: int = 0, infra_s: float = 0.0) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.infra_s = infra_s  # time the failed attempts and their backoff took


class ModelLimitError(Exception):
    """The request exceeds what the model accepts (context window): the harness's fault, scored."""


def check_model(path: str, *, route: str, params: Mapping[str, Any], api_key_env: str | None,
                api_base: str | None = None) -> None:
    """Before any paid work: the route exists (litellm or a registered provider serves it, with these
    params) and its key's variable is set: the one model.api_key_env names, or, without it, the one
    litellm reads for the route (else every call fails, as a "missing credentials" error litellm may
    wrap as a server error). ``path`` names the config node in the error."""

    check_extra(f"{path}.extra", route, params, provider_params=provider_params(route))  # named by its own key
    try:
        check_route(route, params)
    except ProviderCheckError as exc:
        raise ConfigError(path, str(exc), "use a model and parameters the route's provider serves") from None
    except ValueError as exc:
        raise ConfigError(f"{path}.route", str(exc), "use provider/model as litellm names it (e.g. openai/gpt-4o-mini), "
                          "a sim/ tier, or register a model provider") from None
    if api_key_env and not os.environ.get(api_key_env):
        raise ConfigError(f"{path}.api_key_env", f"environment variable {api_key_env} is not set",
                          f"export {api_key_env}=<your key> (keys are read only from the variable model.api_key_env names)")
    missing, certain = missing_key(route, api_base=api_base) if not api_key_env else ([], False)
    if missing and certain:
        either = " or ".join(missing)
        raise ConfigError(f"{path}.api_key_env", f"route {route} needs a key and {either} is not set",
                          f"export {missing[0]}=<your key> (a local server that ignores keys takes any value), "
                          f"or set {path}.api_key_env to the variable that holds it")
    if missing:  # litellm may not know every name the provider reads: said, not refused
        log.warning("%s: route %s: none of %s is set; if the provider needs a key its first call stops the run "
                    "(set %s.api_key_env to the variable that holds it)", path, route, ", ".join(missing), path)
    key = os.environ.get(api_key_env or "") or ""
    if key and (not key.isascii() or key != key.strip() or any(c in key for c in "\r\n")):
        # it goes in an HTTP header: every call would fail the same way, as a retried "outage"
        raise ConfigError(f"{path}.api_key_env", f"the key in {api_key_env} has spaces, line breaks or non-ASCII characters",
                          f"export {api_key_env} again with the key exactly as the provider issued it")


class RouteConfigError(RouteRefused):
    """A failure every call on this route will repeat (bad key, unknown model, a parameter the provider
    refuses): the run stops with one line naming the route, and exit code 2, like any bad config."""


def unparseable(exc: BaseException) -> str | None:
    """Why litellm could not read a reply the provider did send (a tool call without a function, content
    of the wrong type), or None. That is the model's output, not an outage: scored, never retried."""
    # litellm raises this (as an InternalServerError) when converting a provider's reply fails
    if type(exc).__module__.startswith("litellm") and "Invalid response object" in str(exc):
        return "the reply is not a well-formed chat completion"
    return None


# how providers and the OpenAI client word a refused or absent key, whatever litellm wraps it in (a
# missing key reaches us as an InternalServerError): retrying cannot help, and skipping every episode
# would leave a run that "succeeds" with nothing measured
_AUTH_WORDS = ("missing credentials", "api_key client option must be set", "incorrect api key", "invalid api key",
               "invalid_api_key", "invalid x-api-key")


def auth_failure(exc: BaseException) -> bool:
    return getattr(exc, "status_code", None) == 401 or any(w in str(exc).lower() for w in _AUTH_WORDS)



def classify(exc: BaseException) -> str:
    """'infra' (retry, then skip), 'fatal' (stop the run) or 'model' (the episode fails on it)."""
    lm = litellm_module()  # only litellm's exception types: no provider needs registering
    # a 403 (the key works but may not do this) is repeated by every call too, though it is not the key's absence
    if auth_failure(exc) or getattr(exc, "status_code", None) == 403:
        return "fatal"
    if isinstance(exc, (lm.Timeout, lm.RateLimitError, lm.APIConnectionError, lm.InternalServerError,
                        lm.ServiceUnavailableError, lm.BadGatewayError, asyncio.TimeoutError, ConnectionError)):
        return "infra"
    if isinstance(exc, (lm.AuthenticationError, lm.PermissionDeniedError, lm.NotFoundError, lm.UnsupportedParamsError)):
        return "fatal"
    if isinstance(exc, lm.ContextWindowExceededError):
        return "model"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status >= 500 or status == 429):
        return "infra"
    if isinstance(exc, lm.APIError):
        return "infra"  # provider errors without a status: treat as transient, never as quality
    return "fatal"


class ModelClient:
    """One route. Shared by all episodes of an evaluation so the concurrency limit holds."""

    def __init__(self, model: ModelParams, route: RouteSettings, *, cache: ReplyCache | None = None) -> None:
        # the last gate before litellm, whatever path built the variant: model.extra never carries
        # an endpoint, a key or a mock, since litellm would honour any of them
        check_extra("model.extra", model.route, model.extra, provider_params=provider_params(model.route))
        self.model = model
        self.route = route
        self.cache = cache
        self._writes = WriteBehind(cache) if cache is not None else None
        self._semaphore = asyncio.Semaphore(max(1, route.concurrency))
        # what besides the request decides the answer, read once and only when there is a cache to key:
        # the provider's own tag (the simulator's source), litellm's version, the route's revision
        self._key_extra: dict[str, Any] = {}
        self._key = RequestKeyer()
        if cache is not None:  # the tag is read off the provider's registrar: litellm is imported only on a miss
            self._key_extra = {"provider_cache_tag": provider_cache_tag(model.route), "litellm": package_version("litellm"),
                               "revision": route.revision}
        self.billing = Billing(model.route, route)

    def _api_key(self) -> str | None:
        if not self.route.api_key_env:
            return None
        key = os.environ.get(self.route.api_key_env)
        remember_env(self.route.api_key_env, read=False)  # scrubbed everywhere; never a variable a snapshot may interpolate
        if not key:
            raise RouteConfigError("model.api_key_env", f"environment variable {self.route.api_key_env} is not set",
                                   f"export {self.route.api_key_env}=<your key> (the key never goes in config)")
        return key

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], user: str, *,
                seed: int | None = None) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model.route, "messages": list(messages), "temperature": self.model.temperature}
        if seed is not None:  # in the cache key on every route, sent only where the provider takes it
            req["seed"] = seed
        if self.route.send_episode_id:  # a benchmark's task id is nobody's business but a route that asks for it
            req["user"] = user
        if tools:
            req["tools"] = list(tools)
        if self.model.max_tokens is not None:
            req["max_tokens"] = self.model.max_tokens
        if self.route.api_base:
            req["api_base"] = self.route.api_base
        req.update(dict(self.model.extra))
        return req

    def key_settings(self) -> dict[str, Any]:
        """What keys this client's replies besides an episode's own messages, tools and seed: the
        request's fixed settings and the provider's tag, litellm's version and the route's revision."""
        return {"request": self.request([], [], ""), "key": self._key_extra}

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]], user: str,
                       seed: int | None = None) -> ModelReply:
        req = self.request(messages, tools, user, seed=seed)
        key = ""
        if self.cache is not None:  # hashing the whole conversation is worth it only when something is looked up
            memo = tools if "tools" in req else None  # model.extra cannot replace the tools (compiler/model_extra.py)
            key = self._key({**req, "route_revision": self._key_extra}, tools=memo)
            hit = self._writes.pending(key) if self._writes is not None else None  # asked again before it was written
            if hit is None:
                hit = await asyncio.to_thread(self.cache.get, key) if self.cache.remote else self.cache.get(key)
            if hit is not None:
                return self.billing.reprice(reply_from_record(hit, cached=True, key=key))
        lm = ensure_providers()
        api_key = self._api_key()
        keep_seed = "seed" in req and self.route.send_seed and takes_seed(self.model.route)
        sent = req if keep_seed or "seed" not in req else {k: v for k, v in req.items() if k != "seed"}
        attempts = 0
        # The variant's latency is the successful attempt's time inside the provider; failed attempts
        # and backoff are the outage's, reported apart, so an outage never moves an objective.
        # Queueing for a slot is ours, not the model's: in neither.
        latency = infra_s = 0.0
        while True:
            attempts += 1
            try:
                async with self._semaphore:
                    start = time.perf_counter()
                    try:
                        response = await _within(self.route.timeout_s, lm.acompletion(
                            **sent, api_key=api_key, timeout=self.route.timeout_s, num_retries=0, max_retries=0))
                    except BaseException:
                        infra_s += time.perf_counter() - start
                        raise
                    latency = time.perf_counter() - start
                break
            except Exception as exc:
                reason = unparseable(exc)
                if reason is not None:
                    response = None
                    latency = time.perf_counter() - start
                    break
                kind = classify(exc)
                if kind == "fatal":
                    raise self._refused(exc) from None
                if kind == "model":
                    raise ModelLimitError(f"{type(exc).__name__}: {first_line(exc)}") from exc
                if attempts > self.route.retries:
                    raise InfraError(f"{type(exc).__name__} after {attempts} attempts: {first_line(exc)}",
                                     attempts=attempts, infra_s=infra_s) from exc
                # Why our own loop: each attempt must be classified, and an exhausted retry becomes
                # a skipped episode rather than an exception that aborts the whole batch.
                delay = min(self.route.backoff_s * (2 ** (attempts - 1)), MAX_BACKOFF_S)
                await asyncio.sleep(delay)
                infra_s += delay
        if response is None or not getattr(response, "choices", None):
            # billed, but with nothing readable: the tokens are unknown, so the cost is 0 (noted in the record)
            record: dict[str, Any] = {"content": None, "tool_calls": [], "finish_reason": "unparseable", "prompt_tokens": 0,
                                      "completion_tokens": 0, "cached_prompt_tokens": 0, "latency_s": latency, "cost_usd": 0.0,
                                      "unparseable": reason if response is None else "the reply has no choices"}
        else:
            record = record_from_response(response, latency)
            reported = provider_latency(response, measured=latency)
            if reported is not None:  # the provider's own clock: the same on a loaded machine and on a replay
                record["latency_s"], record["latency_source"] = reported, "provider"
            record["cost_usd"], record["priced_by"] = self.billing.cost(response, record["prompt_tokens"],
                                                                        record["completion_tokens"], record["cached_prompt_tokens"])
            record["input_cost_usd"] = self.billing.input_cost(record["prompt_tokens"], record["completion_tokens"], record["cost_usd"])
        record["attempts"] = attempts
        record["infra_s"] = infra_s
        if self._writes is not None:
            self._writes.put(key, record)  # written by the cache's own thread: never on the event loop
        return self.billing.reprice(reply_from_record(record, cached=False, key=key))

    def _refused(self, exc: BaseException) -> RouteConfigError:
        """One line for a failure every call would repeat: what the provider said, and where to fix it."""
        said = _provider_said(exc)
        if auth_failure(exc):
            where = self.route.api_key_env or "the variable litellm reads for this provider (or set model.api_key_env)"
            return RouteConfigError("model.api_key_env", f"route {self.model.route} refused the key ({said})",
                                    f"check the key in {where}")
        return RouteConfigError("model.route", f"route {self.model.route} refused the request ({said})",
                                "check the model name, and the parameters sent (model.temperature, max_tokens, extra, and "
                                "each sample's seed: model.send_seed=false for a server that refuses it) against what the "
                                "provider accepts")

    async def flush(self) -> None:
        """Return once every reply cached so far is stored (an evaluation ends with it)."""
        if self._writes is not None:
            await asyncio.to_thread(self._writes.flush)

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.flush()  # a reply paid for before an error still lands in the cache: a rerun does not pay for it again


async def _within(seconds: float, call: Awaitable[Any]) -> Any:
    """``call``'s result, or TimeoutError once ``seconds`` have passed. The HTTP client's own timeout
    bounds each read, not the reply: a server that trickles a byte at a time never trips it."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if deadline.expired():
            raise TimeoutError(f"no complete reply within model.timeout_s={seconds:g} s; raise model.timeout_s "
                               "if the route is this slow, or check the provider") from None
        raise


_WRAPPER = re.compile(r"^(?:litellm\.)?\w*(?:Error|Exception)(?::| -) ")


def _provider_said(exc: BaseException) -> str:
    """The provider's own message, without the wrappers litellm puts around it, with its HTTP status."""
    text = first_line(exc)
    while (bare := _WRAPPER.sub("", text, count=1)) != text:
        text = bare
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {text}" if isinstance(status, int) else f"{type(exc).__name__}: {text}"
