"""`evoharness <command> --help` for the config-driven commands: what the command does and the
overrides that matter most, then where the whole config is (Hydra's --cfg job prints it)."""
from __future__ import annotations

_COMMON = """
Every key of the config is an override (key=value); groups pick a file (model=sim_small). A value
read from the environment is written ${oc.env:NAME}, never the value itself.

  -m / --multirun         a sweep: model=sim_small,sim_medium runs one job per value
  --config-dir DIR        your own config groups first (agent/, workload/, model/ ...)
  --cfg job [--resolve]   print the composed config instead of running (--package agent: one node)
  --info [searchpath]     what Hydra sees: search path, defaults, plugins

The whole config, with every default: evoharness {command} --cfg job"""

_HELP = {
    "compile": """usage: evoharness compile [overrides] [-m]

Compile the agent (with the release slot's promoted snapshot merged in) into a content-hashed
variant under runs/compiled/<sha256>/ (variant.json, system_prompt.md, tools.json, workflow.json);
print its hash and path, and on stderr which release it shipped.

Overrides that matter most:
  agent=NAME, agent.tool_format=json|bash|both, agent.max_turns=N
  model=sim_small|sim_medium|sim_large|<yours>, model.temperature=0.0
  release_slot=default|fast|null  (null: the base config, no promoted snapshot)""",
    "evaluate": """usage: evoharness evaluate [overrides] [-m]

Run the compiled agent on a workload split with N samples per task; print quality, cost and
latency; write eval.json (metrics, per-task rows, episodes, config, hashes) and each episode's
transcript beside it (evoharness view shows them).

Overrides that matter most:
  workload.split=train|dev  (holdout needs unseal_holdout=true, and is journaled as a look)
  workload.samples=2, workload.limit=N (first N tasks), workload.concurrency=16
  model=..., agent.*=...      what is evaluated
  cache_dir=runs/cache        replies replayed on a rerun: a warm run bills nothing""",
    "search": """usage: evoharness search [overrides]

NSGA-II search over harness edits (prompt sections, tool descriptions, workflow steps, format,
model, temperature) on train; the Pareto front's members that can qualify run on dev; the
champion the decision rule picks is claimed against the incumbent on the sealed holdout.
Resumes where it stopped: finished evaluations are never paid twice.

Overrides that matter most:
  criteria=default|cheap|quality_first      the question (default: cheapest as good within 0.05)
  criteria.margin=0.05, criteria.reference=sim_large
  search.models=[sim_small,sim_medium], search.rounds=3, search.trials_per_round=12
  search.budget_usd=20                      a spend cap every paid call counts against
  search.study=NAME, search.storage=URL     where the study lives (runs/NAME/)""",
    "doctor": """usage: evoharness doctor [overrides]

Check the workload before trusting its numbers: every task's reference solution replayed through
the agent loop and scorer, a do-nothing model's pass rate, determinism, final state scored. A table
per split, every failure listed, a record under runs/doctor/; exit 1 on a failed gate.

Overrides that matter most:
  workload=NAME, workload.options.*=...   the workload as the search will use it
  workload.limit=N                        check the first N tasks of each split (a sample only)
  agent.max_turns=N, agent.tools=[...]    the harness limits the replay runs under""",
    "snapshot": """usage: evoharness snapshot [overrides]

Record the current config (agent, tool overrides, model) as a registry snapshot; print its hash
and path. `evoharness promote HASH` then moves a release slot to it.

Overrides that matter most:
  agent.*=..., model=..., tool.overrides=...   what the snapshot holds
  registry_dir=runs/registry                   where snapshots and promotions are kept""",
}


def command_help(command: str) -> str | None:
    """The help text of a config-driven command, or None for another."""
    text = _HELP.get(command)
    return None if text is None else text + "\n" + _COMMON.replace("{command}", command)
