"""The three simulated tiers: competence (base error rates), price per token, latency.

Base rates are per-call (per-argument for value errors) probabilities at temperature 0, json
format, fully documented tools, no rules/examples and an empty system prompt; ``errors.py``
scales them by the harness's observable properties. The model card (docs/sim-model.md) lists
these numbers; keep the two in sync.
"""
from __future__ import annotations

from dataclasses import dataclass

PROVIDER = "sim"  # the litellm custom provider's name: routes sim/<tier>


@dataclass(frozen=True)
class Tier:
    name: str
    # base error rates
    wrong_tool: float  # calls a sibling tool instead of the gold one
    wrong_value: float  # per argument: perturbs the value
    propagation: float  # per argument whose gold value appears in an earlier tool result
    malformed: float  # bash only: broken quoting or a missing ```tool fence
    skip_read: float  # skips a read-only gold call that precedes a write in the same turn
    premature_stop: float  # per gold call after the first: answers before finishing the turn
    # self-correction
    recover: float  # after an erroneous call comes back as "Error: ...", redo it correctly
    catch: float  # at a verify step, catch each remaining mistake of the turn and redo it
    # economics
    input_cost_per_token: float  # USD
    output_cost_per_token: float  # USD
    base_latency_s: float  # per call, before time_scale
    per_token_latency_s: float  # per completion token, before time_scale


TIERS: dict[str, Tier] = {
    "small": Tier(
        name="small",
        wrong_tool=0.038, wrong_value=0.050, propagation=0.19, malformed=0.03,
        skip_read=0.12, premature_stop=0.055,
        recover=0.45, catch=0.55,
        input_cost_per_token=0.15e-6, output_cost_per_token=0.60e-6,
        base_latency_s=0.25, per_token_latency_s=0.005,
    ),
    "medium": Tier(
        name="medium",
        wrong_tool=0.022, wrong_value=0.030, propagation=0.11, malformed=0.02,
        skip_read=0.065, premature_stop=0.035,
        recover=0.60, catch=0.70,
        input_cost_per_token=0.80e-6, output_cost_per_token=3.20e-6,
        base_latency_s=0.50, per_token_latency_s=0.012,
    ),
    "large": Tier(
        name="large",
        wrong_tool=0.014, wrong_value=0.018, propagation=0.07, malformed=0.01,
        skip_read=0.04, premature_stop=0.022,
        recover=0.75, catch=0.85,
        input_cost_per_token=3.00e-6, output_cost_per_token=12.00e-6,
        base_latency_s=1.00, per_token_latency_s=0.025,
    ),
}


def tier_for(model: str) -> Tier:
    """'sim/small', 'small', 'openai/sim/small' -> the small tier."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    if name not in TIERS:
        raise ValueError(
            f"unknown simulated model {model!r}; use one of "
            f"{', '.join('sim/' + t for t in TIERS)}"
        )
    return TIERS[name]
