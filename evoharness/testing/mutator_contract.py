"""The Mutator protocol's contract, as a class a plugin's tests subclass.

What every mutator owes the search: the same seed gives the same proposals, the context is left
as it was, every entry names its author and a slot that exists, no task value leaks into an
entry, a section entry keeps every sentence of the text it extends, every entry the pools take
compiles to a variant other than the one it was made from, and a mutator that reads the failure
records proposes something other than what it proposes without them.
"""
from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from evoharness.compiler.plugins import load_plugins
from evoharness.compiler.variant import compile_agent
from evoharness.search.genome import LIST_SLOTS, SLOT_KINDS, Genome, Pools, genome_to_config
from evoharness.search.mutators.base import Control, Mutator, Proposal, grow_pools, make_mutator, section_text
from evoharness.testing.mutation_case import MutationCase, order_desk_case


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace normalised."""
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]


def variant_hash(case: MutationCase, genome: Genome, pools: Pools) -> str:
    """The content hash of the agent ``genome`` picks from ``pools`` in ``case``."""
    agent, tool, model = genome_to_config(genome, pools, agent=case.context.agent, tool=case.tool, models=case.models)
    return compile_agent(agent, tool=tool, model=model).content_hash


def using(genome: Genome, proposal: Proposal, pools: Pools, agent: Mapping[str, Any]) -> Genome:
    """``genome`` with the slot of ``proposal`` set to its new entry (the last of its pool)."""
    data = genome.to_dict()
    key = proposal.key or ""
    if proposal.kind == "section":
        data["sections"][key] = len(pools.sections[key]) - 1
    elif proposal.kind == "tool":
        data["tools"][key] = len(pools.tools[key]) - 1
    elif proposal.kind == "step":  # an appended step is switched on, a required step made switchable is switched off
        data["steps"][key] = key not in {s["name"] for s in agent.get("workflow", [])}
    else:
        data[proposal.kind] = len(getattr(pools, LIST_SLOTS[proposal.kind])) - 1
    return Genome.from_dict(data)


class MutatorContract:
    """The Mutator contract suite. Subclass it in a test module (its name starting with ``Test``)
    and name the mutator; every test below then runs against it::

        class TestMyMutator(MutatorContract):
            mutator = "my_rewriter"
            mutator_params = {"strength": 2}
            plugins = ("my_pkg.mutators",)

    Attributes:
        mutator: The registered mutator to build (required, unless the ``mutator_name`` fixture is overridden).
        mutator_params: Keyword arguments for its factory, as ``mutators.enabled[].params`` would give them.
        plugins: Modules to import first, as the ``plugins`` config key names them; installed
            ``evoharness.plugins`` entry points are loaded too.
        may_be_silent: The mutator may honestly propose nothing in the case (say why in a comment).
        evidence_driven: The mutator draws its proposals from the failure records (``ctx.evidence``):
            with the case's records it must propose entries other than those it proposes without any;
            a mutator not so declared must propose the same entries with and without them.
        seed: The ``rng`` seed ``propose`` is called with.

    Raises:
        TypeError: from the ``mutator_name`` fixture, when ``mutator`` is not set.

    Override the ``mutation_case`` fixture to test in a context of your own (a ``MutationCase``;
    the default is ``order_desk_case()``), ``mutator_name`` to parametrise over several mutators,
    and ``make``, ``silent`` or ``reads_evidence`` to build or judge one per name.
    """

    mutator: ClassVar[str] = ""
    mutator_params: ClassVar[Mapping[str, Any]] = {}
    plugins: ClassVar[Sequence[str]] = ()
    may_be_silent: ClassVar[bool] = False
    evidence_driven: ClassVar[bool] = False
    seed: ClassVar[int] = 11

    @classmethod
    def named_mutator(cls) -> str:
        """Import the plugins and return ``mutator``.

        Raises:
            TypeError: ``mutator`` is not set.
        """
        if not cls.mutator:
            raise TypeError(f"{cls.__name__} names no mutator: set mutator = '<registered name>' on the class")
        load_plugins(tuple(cls.plugins))
        return cls.mutator

    @pytest.fixture
    def mutator_name(self) -> str:
        return self.named_mutator()

    @pytest.fixture
    def mutation_case(self) -> MutationCase:
        return order_desk_case()

    def make(self, name: str) -> Mutator:
        """Build mutator ``name``; override to pass parameters per name."""
        return make_mutator(name, **dict(self.mutator_params))

    def silent(self, name: str, case: MutationCase) -> bool:
        """Whether mutator ``name`` may propose nothing in ``case``."""
        return self.may_be_silent

    def reads_evidence(self, name: str) -> bool:
        """Whether mutator ``name`` draws its proposals from the failure records."""
        return self.evidence_driven

    def propose(self, name: str, case: MutationCase) -> list[Proposal | Control]:
        return list(self.make(name).propose(case.context, rng=random.Random(self.seed)))

    def test_same_seed_same_proposals_and_the_context_is_left_alone(self, mutator_name: str, mutation_case: MutationCase) -> None:
        ctx = mutation_case.context
        before = (copy.deepcopy(ctx.agent), ctx.pools.to_dict(), {k: s.to_dict() for k, s in ctx.tools.items()}, ctx.evidence, ctx.front)
        out = self.propose(mutator_name, mutation_case)
        assert out == self.propose(mutator_name, mutation_case), "same seed, different proposals"
        assert (copy.deepcopy(ctx.agent), ctx.pools.to_dict(), {k: s.to_dict() for k, s in ctx.tools.items()}, ctx.evidence,
                ctx.front) == before, f"{mutator_name} changed its context"
        if not self.silent(mutator_name, mutation_case):
            assert out, f"{mutator_name} proposed nothing in the {mutation_case.name} case"

    def test_entries_name_their_author_and_a_slot_and_carry_no_task_value(self, mutator_name: str,
                                                                          mutation_case: MutationCase) -> None:
        ctx = mutation_case.context
        for p in self.propose(mutator_name, mutation_case):
            assert isinstance(p, Proposal | Control), f"{mutator_name} returned {type(p).__name__}"
            if isinstance(p, Control):
                assert p.author == mutator_name and isinstance(p.genome, Genome)
                continue
            assert p.entry.author == mutator_name and p.kind in SLOT_KINDS, p
            assert (p.key is None) == (p.kind in LIST_SLOTS), p
            text = repr(p.entry.value) + p.entry.note
            assert not [v for v in mutation_case.task_values if v in text], f"{mutator_name} leaked a task value: {text}"
            if p.kind == "section":
                assert p.key is not None and p.key in ctx.pools.sections, p.key
                original = section_text(ctx, p.key)
                assert p.entry.value.strip() and len(p.entry.value) >= len(original), p.entry.value
                assert all(s in " ".join(p.entry.value.split()) for s in sentences(original)), (
                    f"{mutator_name} dropped a sentence of section {p.key!r}")

    def test_every_entry_the_pools_take_compiles_to_a_new_variant(self, mutator_name: str, mutation_case: MutationCase) -> None:
        ctx = mutation_case.context
        before = ctx.pools.to_dict()
        pools, added, _ = grow_pools(ctx.pools, self.propose(mutator_name, mutation_case))
        assert ctx.pools.to_dict() == before
        anchor = ctx.front[0]
        base_hash = variant_hash(mutation_case, anchor, pools)
        for p in added:
            assert variant_hash(mutation_case, using(anchor, p, pools, ctx.agent), pools) != base_hash, (
                f"{mutator_name}: {p.kind} {p.key} compiles to the anchor's variant")

    def test_a_mutator_reads_the_failure_records_as_it_declares(self, mutator_name: str, mutation_case: MutationCase) -> None:
        blind = replace(mutation_case, context=replace(mutation_case.context, evidence=()))

        def entries(case: MutationCase) -> list[tuple[str, str | None, str]]:  # notes left out: they always say what was read
            return [(p.kind, p.key, repr(p.entry.value)) for p in self.propose(mutator_name, case) if isinstance(p, Proposal)]

        seen = entries(mutation_case)
        # a reader with nothing honest to propose here must stay silent without the records too
        if self.reads_evidence(mutator_name) and (seen or not self.silent(mutator_name, mutation_case)):
            assert seen, f"{mutator_name} proposed nothing from the {mutation_case.name} case's failure records"
            assert seen != entries(blind), f"{mutator_name} proposes the same entries with and without its failure records"
        else:  # an undeclared reader would be judged by the wrong contract: its answer to the records goes unchecked
            assert seen == entries(blind), (
                f"{mutator_name} proposes other entries when it is given failure records: declare evidence_driven = True")
