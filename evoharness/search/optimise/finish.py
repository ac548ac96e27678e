"""After the rounds: the front re-evaluated on dev, the champion chosen by the decision rule, the
holdout touched once (champion against baseline; the baseline's run beside the dev selection,
which never reads it), and every record written. Three stages, each its own module:
select_dev (select on dev), claim_holdout (claim on the holdout), write_outcome (the records)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evoharness.compiler.variant import HarnessVariant
from evoharness.search.genome import Genome, Pools
from evoharness.search.optimise.claim_holdout import claim_on_holdout
from evoharness.search.optimise.select_dev import Evaluate, FinishAborted, SearchTrials, select_on_dev
from evoharness.search.optimise.settings import RunSettings, StudyPaths
from evoharness.search.optimise.write_outcome import write_outcome
from evoharness.search.records.looks import Seal

__all__ = ["Evaluate", "FinishAborted", "Frozen", "SearchTrials", "finish"]


@dataclass(frozen=True)
class Frozen:
    """What freeze.json pins for a study: the hashes a claim is made under."""

    config_hash: str
    workload_hash: str
    splits_hash: str
    scorer_hash: str
    seed: int
    split_strata: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # split -> stratum -> tasks
    tool_outputs_hash: str | None = None  # the replayed tool-output snapshot, when the workload replays one
    live_tools: tuple[str, ...] = ()  # tools that ran live (search.live_ok=true): every record names them
    doctor: Mapping[str, Any] = field(default_factory=dict)  # the doctor's verdict when this run started (doctor_record.status)
    # not a freeze.json key: the holdout's own hash (search/records/looks.py), derived from the frozen
    # splits by the run, so `evaluate` looks at the same split are counted with the study's
    holdout_hash: str | None = None
    holdout_clusters: frozenset[str] = frozenset()  # likewise: the holdout's clusters, for looks under other options

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Frozen:
        return cls(config_hash=str(d["config_hash"]), workload_hash=str(d["workload_hash"]), splits_hash=str(d["splits_hash"]),
                   scorer_hash=str(d["scorer_hash"]), seed=int(d["seed"]), split_strata=dict(d.get("split_strata") or {}),
                   tool_outputs_hash=d.get("tool_outputs_hash"), live_tools=tuple(map(str, d.get("live_tools") or ())),
                   doctor=dict(d.get("doctor") or {}))

    def hashes(self) -> dict[str, str]:
        out = {"config": self.config_hash, "workload": self.workload_hash, "splits": self.splits_hash, "scorer": self.scorer_hash}
        return {**out, "tool_outputs": self.tool_outputs_hash} if self.tool_outputs_hash else out


def finish(
    settings: RunSettings, paths: StudyPaths, frozen: Frozen, trials_of: SearchTrials, pools: Pools, *,
    evaluate: Evaluate, variant_of: Callable[[Genome], HarnessVariant], echo: Callable[[str], None],
    budget: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    chosen = select_on_dev(settings, paths, trials_of, pools, evaluate=evaluate, variant_of=variant_of, echo=echo)
    seal = Seal(holdout_hash=frozen.holdout_hash or "", splits_hash=frozen.splits_hash, clusters=frozen.holdout_clusters)
    held = claim_on_holdout(settings, paths, frozen.hashes(), chosen, pools, evaluate=evaluate, variant_of=variant_of, seal=seal,
                            holdout_tasks=sum(int(n) for n in frozen.split_strata.get("holdout", {}).values()))
    return write_outcome(settings, paths, trials_of, pools, chosen, held, config_hash=frozen.config_hash,
                         splits_hash=frozen.splits_hash, split_strata=frozen.split_strata, variant_of=variant_of, budget=budget,
                         live_tools=frozen.live_tools, doctor=frozen.doctor)
