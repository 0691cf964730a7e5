"""Which design a comparison of two arms can use: paired by seed, or two independent samples.

Pairing removes the world's difficulty from the noise, but only where a seed *is* a world: each simulator's
descriptor says whether (and for which reset mode) its world is a function of the seed (contracts/simulators.py).
Elsewhere the arms are independent samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from mcu_arms.contracts.simulators import find_simulator

Design = Literal["paired", "unpaired"]


class ExcludedSeed(BaseModel):
    """A seed one arm completed and the other did not: left out of a paired comparison, and why."""

    seed: int
    arm: str  # the arm without a finished episode of it
    cause: str  # its latest episode's exclusion reason ("interrupted", "failed", ...), or "not run"
    reason: str  # in words, e.g. "episode 9 interrupted: Ctrl-C"

    def text(self) -> str:
        return f"seed {self.seed} ({self.arm}: {self.reason})"


class Pairing(BaseModel):
    """The design a comparison uses, and why (also when it is paired: which seeds pair the arms)."""

    design: Design
    reason: str
    seeds: list[int]  # the seeds both arms completed (paired), else empty
    unpartnered: list[int] = []  # paired: seeds only one arm completed, left out
    excluded: list[ExcludedSeed] = []  # those seeds with who lacks them and why (filled by the analysis)

    def excluded_text(self) -> str:
        """The seeds left out of the pairing, with why; empty when none."""
        if self.excluded:
            return "excluded: " + "; ".join(seed.text() for seed in self.excluded)
        return f"excluded: {_listed(self.unpartnered)} (one arm only)" if self.unpartnered else ""


def seeded_world(simulator: str, reset_mode: str | None) -> str | None:
    """None when the simulator's world is a function of the seed (its descriptor says), else why not."""
    descriptor = find_simulator(simulator)
    if descriptor is None:
        return f"simulator '{simulator}' is not registered here, so not known to make its world from the seed"
    return descriptor.world_from_seed(reset_mode)


def pairing(
    simulator_a: str,
    reset_mode_a: str | None,
    seeds_a: Sequence[int],
    simulator_b: str,
    reset_mode_b: str | None,
    seeds_b: Sequence[int],
) -> Pairing:
    """Paired over the seeds both arms completed (at least 2) on the same simulator whose world is a function of the
    seed; a seed only one arm completed is left out (`unpartnered`), not the whole pairing."""
    if simulator_a != simulator_b or _reset(simulator_a, reset_mode_a) != _reset(simulator_b, reset_mode_b):
        return Pairing(
            design="unpaired",
            reason="the arms ran on different simulators or resets: a seed is not the same world in both",
            seeds=[],
        )
    why_not = seeded_world(simulator_a, reset_mode_a)
    if why_not is not None:
        return Pairing(design="unpaired", reason=why_not, seeds=[])
    if len(set(seeds_a)) != len(seeds_a) or len(set(seeds_b)) != len(seeds_b):
        return Pairing(design="unpaired", reason="a seed appears more than once in an arm", seeds=[])
    common = sorted(set(seeds_a) & set(seeds_b))
    only = sorted(set(seeds_a) ^ set(seeds_b))
    if len(common) < 2 and only:
        return Pairing(
            design="unpaired",
            reason=f"the arms completed different seeds (fewer than 2 in common; only one ran {_listed(only)})",
            seeds=[],
        )
    world = f"on {simulator_a}, whose world is a function of the seed"
    if not only:
        return Pairing(design="paired", reason=f"same seeds {world}", seeds=common)
    return Pairing(
        design="paired",
        reason=f"paired over the {len(common)} seeds both arms completed {world}",
        seeds=common,
        unpartnered=only,
    )


def _reset(simulator: str, reset_mode: str | None) -> str | None:
    """How the simulator starts each task (unset: its default); None for one with no reset modes."""
    descriptor = find_simulator(simulator)
    return descriptor.resolved_reset(reset_mode) if descriptor is not None else reset_mode


def _listed(seeds: list[int], shown: int = 6) -> str:
    head = ", ".join(str(seed) for seed in seeds[:shown])
    return f"seed{'s' if len(seeds) > 1 else ''} {head}{', ...' if len(seeds) > shown else ''}"
