"""Structured-config schemas for every config group, registered in Hydra's ConfigStore.

YAML files under conf/ extend these; OmegaConf enforces the types, so a wrong type in a file or
an override fails at composition time with the key named.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, OmegaConf

from evoharness.compiler.names import study_name

TOOL_FORMATS = ("json", "bash", "both")
STEP_TRIGGERS = ("prompt", "before_final")


@dataclass
class WorkflowStepConfig:
    name: str = MISSING  # step identifier, unique within the workflow
    instructions: str = MISSING  # what the agent does in this step (Jinja2 text)
    after: list[str] = field(default_factory=list)  # names of steps that must come first
    optional: bool = False  # the search may switch this step off
    enabled: bool = True  # false leaves an optional step out of the compiled variant
    trigger: str = "prompt"  # prompt: procedure only; before_final: also sent once before a turn's final answer


SECTION_ROLES = ("rules", "style", "identity")  # what a prompt section is for (agent.section_roles)


@dataclass
class ContextConfig:
    # the longest result sent to the model per tool name ("*": every tool without its own); head and tail
    # are kept and the cut is said. Empty: every result is sent whole
    tool_result_chars: dict[str, int] = field(default_factory=dict)
    # the user turns whose tool results are sent as they came (the current one and the ones before it);
    # an older turn's results are clipped to MIN_CHARS (200) with the cut said. None: every turn kept
    keep_turns: int | None = None
    # the tools a turn is offered besides those the episode called: those whose name and description share
    # the most words with the turn's user messages. None: every tool on every call
    tools_per_turn: int | None = None


@dataclass
class ModelConfig:
    route: str = MISSING  # any litellm model string, e.g. openai/gpt-4o-mini or sim/small
    temperature: float = 0.0  # sampling temperature
    max_tokens: int | None = None  # completion cap; None = provider default
    api_base: str | None = None  # endpoint for self-hosted / OpenAI-compatible servers
    api_key_env: str | None = None  # NAME of the env var holding the key; the key never enters config
    timeout_s: float = 60.0  # per-call timeout
    retries: int = 3  # retries of infrastructure failures, with exponential backoff
    backoff_s: float = 0.5  # first backoff delay
    concurrency: int = 8  # most calls in flight on this route from one evaluation (one launcher worker)
    send_episode_id: bool = False  # episode id as the request's `user` field (the simulator needs it; real providers do not)
    send_seed: bool = True  # each sample's `seed` where the provider takes it; false for a server that refuses the parameter
    input_cost_per_token: float | None = None  # price override, USD per prompt token
    output_cost_per_token: float | None = None  # price override, USD per completion token
    free: bool = False  # calls cost nothing (self-hosted): a route litellm has no price for is then $0, not unknown
    revision: str | None = None  # the deployment's version, yours to bump when the model behind the route changes (response-cache key)
    extra: dict[str, Any] = field(default_factory=dict)  # further litellm completion params


@dataclass
class EscalationConfig:
    # the stronger model a troubled turn is handed to: a model config, e.g. +model@agent.escalation.model=sim_large
    model: ModelConfig | None = None
    on: list[str] = field(default_factory=lambda: ["tool_error", "max_turns"])  # tool_error | max_turns | review


@dataclass
class AgentConfig:
    name: str = MISSING  # agent identifier; registry snapshots are keyed by it
    prompt_sections: dict[str, str] = MISSING  # ordered named sections of the system prompt (Jinja2 text)
    tools: list[str] = MISSING  # tool names or glob patterns over the tool catalog
    tool_format: str = "json"  # json (native tools) | bash (calls in message text) | both
    workflow: list[WorkflowStepConfig] = field(default_factory=list)  # steps of the procedure (a DAG)
    max_turns: int = 12  # most model calls allowed per user turn
    context: ContextConfig = field(default_factory=ContextConfig)  # what of the conversation each call re-sends
    escalation: EscalationConfig = field(default_factory=EscalationConfig)  # where a troubled turn goes (none by default)
    vars: dict[str, Any] = field(default_factory=dict)  # extra variables for the section templates
    template: str = "system_prompt.md.j2"  # system-prompt template under compiler/templates/
    # what each section is for, so mutators find it whatever its name: rules | style | identity
    # (undeclared: policy/rules -> rules, style -> style, role/identity -> identity)
    section_roles: dict[str, str] = field(default_factory=dict)


@dataclass
class ToolDefinitionConfig:
    description: str = MISSING  # what the tool does, shown to the model
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})  # JSON schema
    rules: list[str] = field(default_factory=list)  # usage rules rendered into the prompt
    examples: list[str] = field(default_factory=list)  # example calls
    mutates_state: bool = False  # whether a call can change the environment
    group: str = ""  # owning API, e.g. GorillaFileSystem


@dataclass
class ToolOverrideConfig:
    description: str | None = None  # replaces the catalog description
    description_append: str = ""  # appended to the description
    rules: list[str] = field(default_factory=list)  # added usage rules
    examples: list[str] = field(default_factory=list)  # added example calls


@dataclass
class ToolCatalogConfig:
    source: str | None = None  # registered catalog loader (e.g. bfcl); None = YAML definitions only
    # tools defined in YAML, each checked against ToolDefinitionConfig (kept untyped here so that
    # `+tool.definitions.name={...}` works from the command line)
    definitions: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)  # per-tool edits, each a ToolOverrideConfig
    callables: list[str] = field(default_factory=list)  # Python functions as tools, by import path (compiler/callables.py)


@dataclass
class WorkloadConfig:
    name: str = MISSING  # registered workload, e.g. bfcl
    split: str = "dev"  # train | dev | holdout
    samples: int = 1  # samples per task
    concurrency: int = 16  # episodes in flight
    limit: int | None = None  # first N tasks of the split; None = all
    max_skip_rate: float = 0.1  # evaluate fails (exit 1) when more episodes than this were skipped as outages
    options: dict[str, Any] = field(default_factory=dict)  # workload constructor options


@dataclass
class CriterionConfig:
    """One criterion as written in ``conf/criteria/*.yaml``."""

    name: str = ""  # unique label; empty = derived from kind (and score_name)
    kind: str = MISSING  # one of KINDS
    threshold: float | None = None  # target; null only for an objective-only criterion
    quantile: float | None = None  # score_quantile only: q in [0, 1], e.g. 0.1
    score_name: str | None = None  # scope by_name only: which named sub-score to read
    scope: str = "any"  # any = overall score; by_name = the named sub-score score_name
    weight: float = 1.0  # > 0; share of this criterion in the weighted aggregation
    hard: bool = False  # constraint: violated = infeasible, no weighted score buys it back
    objective: bool = False  # also a search objective (optimise this metric's direction)


@dataclass
class CriteriaConfig:
    """The ``criteria`` config group."""

    criteria: list[CriterionConfig] = field(default_factory=list)  # judged in this order
    aggregation: str = "all"  # all = every criterion must hold; weighted = see module doc
    decision: str = "cheapest_noninferior"  # which front member ships: cheapest_noninferior | fastest_noninferior | best_quality
    margin: float = 0.05  # *_noninferior: quality may fall this far below the reference's
    reference: str = "incumbent"  # *_noninferior: "incumbent", or a search.models name (the base harness on it)


@dataclass
class MutatorConfig:
    name: str = MISSING  # registered mutator
    weight: float = 1.0  # chance of running in a round (>= 1: every round; 0: never)
    params: dict[str, Any] = field(default_factory=dict)  # mutator options (e.g. route for LLM mutators)


@dataclass
class MutatorsConfig:
    enabled: list[MutatorConfig] = field(default_factory=list)  # mutators that grow the pools
    pool_size: int = 4  # variants kept per genome slot


@dataclass
class RaceConfig:
    enabled: bool = True  # race each proposal against its anchor on paired blocks of train tasks; false = evaluate every one in full
    first_block: int = 10  # train tasks in a proposal's first block (at least 10)
    growth: float = 2.0  # each block's cumulative tasks over the one before, up to the whole train split
    # train tasks in all a proposal ahead of its anchor on the search's train tasks may run (the next
    # ones of the train split, its anchor on them too); null = the whole train split; <= train_limit = none
    max_tasks: int | None = 120


@dataclass
class SearchConfig:
    study: str = "evoharness"  # study name; re-running it resumes (runs/<study>/)
    storage: str | None = None  # Optuna storage URL; None = sqlite:///runs/<study>/study.db
    rounds: int = 2  # mutation rounds; pools grow between rounds
    trials_per_round: int = 12  # a round's budget: this many full train evaluations' worth of episodes (resumed trials count)
    population_size: int = 6  # NSGA-II population = one launcher batch
    sampler: str = "nsga2"  # nsga2 | tpe (multi-objective TPE) | random (a control)
    # share of each later round's budget left to the sampler, after the mutators' proposals, the
    # controls and the accumulated genomes: its recombinations of pooled entries across slots
    sampler_share: float = 0.25
    crossover: str = "uniform"  # NSGA-II crossover: uniform | blxalpha | sbx | vsbx | undx | spx
    seed: int = 0  # sampler and mutator seed
    models: list[str] = field(default_factory=list)  # model config names the search may swap to
    temperatures: list[float] = field(default_factory=lambda: [0.0, 0.7])  # temperature choices
    formats: list[str] = field(default_factory=lambda: ["json", "bash", "both"])  # tool_format choices
    samples: int = 2  # samples per task on train, dev and holdout
    train_limit: int | None = 40  # first N train tasks per candidate; None = the whole split
    max_front_dev: int = 4  # front members re-evaluated on dev (spread along the cost axis; cheapest and best always)
    confidence: float = 0.95  # holdout bootstrap CI level
    min_effect: float = 0.03  # smallest quality gain the claim must clear to be a win; inside ±it: equivalent
    resamples: int = 10000  # bootstrap resamples
    max_failure_rate: float = 0.5  # abort when a larger share of trials fails
    teacher: str | None = None  # model config name the teacher-gap rewriter may run
    second_look: bool = False  # allow a holdout claim for a champion other than those the sealed split was looked at for (by any study)
    allow_underpowered: bool = False  # run a search whose splits cannot show non-inferiority within the margin (the claim says so)
    budget_usd: float | None = None  # cap on the search's model spend (episodes, LLM mutators, teacher); None = no cap
    live_ok: bool = False  # let live tools run live in the search (no replayed snapshot): outputs may drift; every record says so
    race: RaceConfig = field(default_factory=RaceConfig)  # proposals judged on paired, growing blocks of train tasks


@dataclass
class EvoConfig:
    agent: AgentConfig = MISSING  # the agent to compile
    tool: ToolCatalogConfig = field(default_factory=ToolCatalogConfig)  # tool catalog and overrides
    model: ModelConfig = MISSING  # model route
    workload: WorkloadConfig = MISSING  # tasks, environment and scorer
    criteria: CriteriaConfig = field(default_factory=CriteriaConfig)  # what better means
    mutators: MutatorsConfig = field(default_factory=MutatorsConfig)  # how variants are grown
    search: SearchConfig = field(default_factory=SearchConfig)  # the NSGA-II search
    seed: int = 0  # global seed for episodes and sampling
    runs_dir: str = "runs"  # output root
    registry_dir: str = "${runs_dir}/registry"  # registry root
    release_slot: str | None = "default"  # promoted slot merged into the base config (e.g. fast); null = base config only
    cache_dir: str | None = "${runs_dir}/cache"  # model response cache: a folder or redis://host:port/db; None disables it
    plugins: list[str] = field(default_factory=list)  # modules imported before composition (see compiler/plugins.py)
    unseal_holdout: bool = False  # `evaluate workload.split=holdout` only with this set; each such look is journaled


SCHEMAS: dict[str, type] = {"agent": AgentConfig, "tool": ToolCatalogConfig, "model": ModelConfig, "workload": WorkloadConfig,
                             "criteria": CriteriaConfig, "mutators": MutatorsConfig, "search": SearchConfig}


def unknown_keys(cfg: Any) -> list[str]:
    """Config paths a schema does not define: Hydra's ``+key=value`` adds them even to a typed group,
    where nothing would ever read them (a silent no-op the user meant as a setting)."""
    from dataclasses import fields

    known_top = {f.name for f in fields(EvoConfig)} | {"hydra", "trial"}
    found = [str(k) for k in cfg.keys() if str(k) not in known_top]
    for group, schema in SCHEMAS.items():
        node = cfg.get(group)
        if node is not None and hasattr(node, "keys"):
            names = {f.name for f in fields(schema)}
            found += [f"{group}.{k}" for k in node.keys() if str(k) not in names]
    for i, step in enumerate((cfg.get("agent") or {}).get("workflow") or []):
        if hasattr(step, "keys"):
            names = {f.name for f in fields(WorkflowStepConfig)}
            found += [f"agent.workflow[{i}].{k}" for k in step.keys() if str(k) not in names]
    return found


OmegaConf.register_new_resolver("evoharness.study", study_name, replace=True)


def register_configs() -> None:
    """Register the schemas; idempotent, called before Hydra composes."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="evoharness_schema", node=EvoConfig)
    for group, node in (
        ("agent", AgentConfig),
        ("tool", ToolCatalogConfig),
        ("model", ModelConfig),
        ("workload", WorkloadConfig),
        ("criteria", CriteriaConfig),
        ("mutators", MutatorsConfig),
        ("search", SearchConfig),
    ):
        cs.store(group=group, name=f"{group}_schema", node=node)
