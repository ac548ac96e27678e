"""False wins on a null: how often does the whole search claim an improvement that is not there?

A null model (litellm provider ``null/coin``, defined here) passes or fails each episode by a coin
whose bias depends on the task only: every harness has exactly the same expected quality. Each
episode's coin is drawn from (task, seed, sample, what the variant sends: system prompt, tools,
temperature), so two variants get independent noise, as two prompts do on a real model. On a pass it replays the task's reference
calls (in the tool format the harness asked for), on a fail it answers without calling a tool.

1. **Through the search.** The default main job (BFCL, the default budget, rounds and mutators)
   with ``model.route=null/coin``, ``search.models=[]`` (no model to swap to) and
   ``criteria.decision=best_quality`` (a superiority claim: on the null, "cheaper and as good" can
   be true, "better" cannot), for 10 seeds, two at a time. Target: at most 1 ``win`` in 10.
2. **The statistic alone.** Monte-Carlo: paired null data of the holdout's shape (324 tasks in 81 scenarios of 4, 2
   samples, per-task pass rates spread over [0.2, 0.8], champion and baseline independent), the
   claim's test at its defaults. Target: false-win rate within [0, 0.03] (nominal 0.025).

    python bench/null_claims.py [--quick]      # 10 seeds + 2000 draws (~25 min); --quick 3 seeds + 400
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import ROOT

ROUTE = "null/coin"
PRICE_IN, PRICE_OUT = 0.15e-6, 0.6e-6  # sim_small's, so cost criteria behave as on the main job


def _u(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big") / 2.0**64


def task_pass_rate(task_id: str) -> float:
    return 0.2 + 0.6 * _u("null-p", task_id)


# -- the null model: a litellm custom provider ------------------------------------------------

def register_null_provider() -> None:
    import litellm
    from evoharness.compiler.sim.conversation import parse_user, split_conversation
    from evoharness.compiler.sim.gold import WorkloadGoldSource
    from evoharness.compiler.sim.render import FENCE, bash_line
    from litellm import CustomLLM
    from litellm.types.utils import ChatCompletionMessageToolCall, Function

    gold = WorkloadGoldSource()

    def user_of(optional: Mapping[str, Any], logging_obj: Any) -> str | None:
        details = getattr(logging_obj, "model_call_details", None) or {}
        return optional.get("user") or details.get("user")

    def answer(messages: list[Any], optional: Mapping[str, Any], logging_obj: Any) -> Any:
        meta = parse_user(user_of(optional, logging_obj))
        task = gold.task(meta.task_id)
        conv = split_conversation(messages, [[str(m.get("content", "")) for m in t] for t in task.turns])
        tools = optional.get("tools")
        # what the variant sends: prompt, tools and temperature (a real model's noise differs for each)
        sent = [conv.system_prompt, tools, optional.get("temperature")]
        harness = hashlib.sha256(json.dumps(sent, sort_keys=True, default=str).encode()).hexdigest()
        passes = _u("null-coin", meta.task_id, meta.seed, meta.sample, harness) < task_pass_rate(meta.task_id)
        calls = tuple(task.gold[conv.turn]) if passes and conv.turn < len(task.gold) else ()
        made = sum(len(e.results) for e in conv.current if e.kind == "tool_results")
        content, tool_calls = "Done.", None
        if made < len(calls):
            call = calls[made]
            if tools:
                tool_calls = [ChatCompletionMessageToolCall(id=f"call_{harness[:8]}_{made}", type="function",
                                                            function=Function(name=call.name, arguments=json.dumps(dict(call.arguments))))]
                content = ""
            else:
                content = f"{FENCE}\n{bash_line(call.name, call.arguments)}\n```"
        message = litellm.Message(role="assistant", content=content, tool_calls=tool_calls)
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4 + 50
        return litellm.ModelResponse(
            model=ROUTE, choices=[litellm.Choices(index=0, finish_reason="tool_calls" if tool_calls else "stop", message=message)],
            usage=litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=20, total_tokens=prompt_tokens + 20))

    class NullLLM(CustomLLM):
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return answer(messages, kwargs.get("optional_params") or {}, kwargs.get("logging_obj"))

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            await asyncio.sleep(0)
            return answer(messages, kwargs.get("optional_params") or {}, kwargs.get("logging_obj"))

    from evoharness.compiler.runtime.llm import register_model_provider

    @register_model_provider("null")
    def _null() -> None:
        # idempotent, and never a moment without the entry: this runs before every model call
        if any(e.get("provider") == "null" for e in litellm.custom_provider_map):
            return
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": "null", "custom_handler": NullLLM()}]
        litellm.register_model({ROUTE: {"input_cost_per_token": PRICE_IN, "output_cost_per_token": PRICE_OUT,
                                        "litellm_provider": "null", "mode": "chat", "supports_function_calling": True}})


def one_search(seed: int, runs_dir: str) -> int:
    """Run in a child process: register the null provider, then the search command in-process."""
    register_null_provider()
    from evoharness.search.cli.main import main

    # each seed is an independent null world: a registry of its own, so its claim is not a later look at
    # the holdout the other seeds' searches already claimed on
    return main(["search", f"runs_dir={runs_dir}", f"search.study=null{seed}", f"search.seed={seed}", f"seed={seed}",
                 f"registry_dir={runs_dir}/registry-null{seed}", f"model.route={ROUTE}", "search.models=[]",
                 "criteria.decision=best_quality"])


# -- the statistic alone ---------------------------------------------------------------------

def monte_carlo(draws: int, *, tasks: int = 324, samples: int = 2, min_effect: float = 0.03) -> float:
    import numpy as np
    from evoharness.search.evaluation.stats import quality_test, superiority_verdict

    rng = np.random.default_rng(0)
    p = 0.2 + 0.6 * rng.random(tasks)
    wins = 0
    for i in range(draws):
        a = rng.binomial(samples, p) / samples
        b = rng.binomial(samples, p) / samples
        result = quality_test(a, b, null=min_effect, clusters=[str(t // 4) for t in range(tasks)], confidence=0.95)
        wins += superiority_verdict(result, min_effect=min_effect) == "win"
    return wins / draws


def figure(name: str, value: Any, target: str, met: bool, **extra: Any) -> None:
    print(json.dumps({"figure": name, "value": value, "target": target, "met": met, **extra}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: one seed
    parser.add_argument("--runs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        return one_search(args.one, args.runs)
    seeds = range(3 if args.quick else 10)
    base = Path(tempfile.mkdtemp(prefix="null-claims-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def run(seed: int) -> tuple[int, dict[str, Any] | None, float]:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--one", str(seed), "--runs", str(base)], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        claim_path = base / f"null{seed}" / "claim.json"
        if proc.returncode != 0 or not claim_path.exists():
            print(f"seed {seed} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return seed, None, time.perf_counter() - start
        return seed, json.loads(claim_path.read_text()), time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=2) as pool:  # two searches at a time: the machine has 2 cores
        results = list(pool.map(run, seeds))
    claims = [c for _, c, _ in results if c is not None]
    verdicts = [c["verdict"] for c in claims]
    wins = verdicts.count("win")
    figure("null_search_wins", wins, f"<= 1 of {len(seeds)}", wins <= 1 and len(claims) == len(seeds),
           seeds=len(seeds), completed=len(claims), verdicts={v: verdicts.count(v) for v in sorted(set(verdicts))},
           median_diff=round(statistics.median(c["mean_diff"] for c in claims), 3) if claims else None,
           minutes_per_search=round(statistics.median(t for *_, t in results) / 60, 1))
    draws = 400 if args.quick else 2000
    rate = monte_carlo(draws)
    figure("null_statistic_false_win_rate", rate, "within [0, 0.03]", 0.0 <= rate <= 0.03, draws=draws)
    # at min_effect 0 the test's own size shows: it should sit near the nominal one-sided 0.025
    calibration = monte_carlo(draws, min_effect=0.0)
    figure("null_statistic_false_win_rate_min_effect_0", calibration, "near 0.025 (nominal)", 0.01 <= calibration <= 0.04,
           draws=draws)
    print(f"null: {wins} win(s) in {len(claims)} searches; the statistic's false-win rate {rate:.4f} over {draws} draws")
    return 0


if __name__ == "__main__":
    sys.exit(main())
