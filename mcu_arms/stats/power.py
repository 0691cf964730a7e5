"""How many paired seeds resolve a difference: the power of the rule `compare` applies, by simulation.

A normal approximation ("about N seeds", z-based) reaches 65–77 % power at its N with the exact test, because it
ignores the sign-flip test's discreteness (no p below 2 / 2^n), zeros and ties, and the Holm family. Here each
simulated experiment of n paired seeds is judged by the rule itself: the exact two-sided sign-flip p (all 2^n signs
up to EXACT_POWER_MAX_PAIRS pairs; beyond, POWER_SIGNS seeded random signs with (hits + 1) / (N + 1), which keeps
the discreteness that zeros and ties give) below alpha / variants — Holm's first step, which is where a same-sign
difference in every variant is decided, as their p-values are then equal — and the paired t interval excluding 0. The
differences are drawn either from a pilot's per-seed differences (resampled with replacement: its zeros, ties and
skew kept) or from a normal distribution of a stated effect and spread. Seeded: the same question gets the same
answer. Sequential designs are not simulated here: `run --until-resolved` plans its own looks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from mcu_arms.stats.basics import ALPHA, CONFIDENCE, RESAMPLE_SEED, t_quantile

if TYPE_CHECKING:
    import numpy as np

POWER_TARGET = 0.8
POWER_SIMULATIONS = 2_000
MAX_PLANNED_SEEDS = 64  # "seeds needed" is searched up to this; beyond it: more than 64
EXACT_POWER_MAX_PAIRS = 11  # 2,048 sign vectors per simulated experiment; beyond: POWER_SIGNS random ones
POWER_SIGNS = 2_000  # seeded random sign vectors shared by the simulated experiments of more than 11 pairs
SIMULATION_CHUNK = 500  # simulated experiments judged at once (memory: chunk × 2,048 sums)
POWER_METHOD = (
    f"power by simulation ({POWER_SIMULATIONS:,} seeded experiments per n) of the rule applied: exact sign-flip "
    f"p < {ALPHA:g} / variants (Holm's first step) and the paired t interval excluding 0"
)

Sampler = Callable[["np.random.Generator", int, int], "np.ndarray"]  # (rng, experiments, pairs) -> differences


class PowerPlan(BaseModel):
    """Seeds for POWER_TARGET power, and the smallest effect resolvable at the seeds planned."""

    source: str  # where the differences come from, in words
    variants: int
    seeds_planned: int
    power_at_planned: float
    seeds_needed: int | None  # None: more than MAX_PLANNED_SEEDS
    smallest_effect: float | None  # at the seeds planned, in the metric's units; None: no spread given or estimated
    method: str = POWER_METHOD


def sign_flip_p_many(data: np.ndarray) -> np.ndarray:
    """The two-sided sign-flip p of each row of `data` (experiments × pairs): exact up to EXACT_POWER_MAX_PAIRS, else
    by POWER_SIGNS seeded random sign vectors."""
    import numpy as np

    experiments, pairs = data.shape
    totals = np.abs(data.sum(axis=1))
    exact = pairs <= EXACT_POWER_MAX_PAIRS
    if exact:
        signs = 1 - 2 * ((np.arange(2**pairs)[:, None] >> np.arange(pairs)) & 1)  # 2^n × n of ±1
    else:
        signs = 1 - 2 * np.random.default_rng([RESAMPLE_SEED, pairs]).integers(0, 2, (POWER_SIGNS, pairs))
    p_values = np.empty(experiments)
    for start in range(0, experiments, SIMULATION_CHUNK):
        chunk = data[start : start + SIMULATION_CHUNK]
        threshold = totals[start : start + SIMULATION_CHUNK, None] * (1 - 1e-9) - 1e-12
        hits = (np.abs(chunk @ signs.T) >= threshold).sum(axis=1)
        p_values[start : start + SIMULATION_CHUNK] = hits / len(signs) if exact else (hits + 1) / (len(signs) + 1)
    return p_values


def resolved_many(data: np.ndarray, variants: int, alpha: float = ALPHA) -> np.ndarray:
    """Which simulated experiments the rule resolves (see the module's docstring)."""
    import numpy as np

    pairs = data.shape[1]
    mean = data.mean(axis=1)
    half = t_quantile(CONFIDENCE, pairs - 1) * data.std(axis=1, ddof=1) / math.sqrt(pairs)
    excludes_zero = np.abs(mean) > half
    return (sign_flip_p_many(data) < alpha / variants) & excludes_zero


def power(sampler: Sampler, pairs: int, *, variants: int = 1, alpha: float = ALPHA, seed: int = RESAMPLE_SEED) -> float:
    """The share of POWER_SIMULATIONS experiments of `pairs` seeds that the rule resolves; 0 where the exact test
    cannot go below alpha / variants at all."""
    import numpy as np

    if pairs < 2 or (pairs <= EXACT_POWER_MAX_PAIRS and 2 / 2**pairs >= alpha / variants):
        return 0.0
    data = sampler(np.random.default_rng([seed, pairs]), POWER_SIMULATIONS, pairs)
    return float(resolved_many(data, variants, alpha).mean())


def seeds_for_power(sampler: Sampler, *, at_least: int, variants: int = 1, alpha: float = ALPHA) -> int | None:
    """Pairs ≥ `at_least` whose simulated power reaches POWER_TARGET, one fewer not (searched by doubling, then
    bisection: a dozen simulations, not one per n); None: more than MAX_PLANNED_SEEDS."""

    def enough(pairs: int) -> bool:
        return power(sampler, pairs, variants=variants, alpha=alpha) >= POWER_TARGET

    low = max(2, at_least)
    if enough(low):
        return low
    high = low
    while not enough(high):
        if high >= MAX_PLANNED_SEEDS:
            return None
        low, high = high, min(MAX_PLANNED_SEEDS, high * 2)
    while high - low > 1:  # power(low) < target <= power(high)
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def seeds_to_resolve(variants: int, alpha: float = ALPHA) -> int:
    """The fewest paired seeds at which a difference of the same sign on every seed, in each of `variants`, resolves
    in their Holm family: 2 / 2^n < alpha / variants (the variants' p-values are then all the smallest possible)."""
    pairs = 1
    while 2 / 2**pairs >= alpha / variants:
        pairs += 1
    return pairs


def pilot_sampler(differences: Sequence[float]) -> Sampler:
    """Experiments drawn from a pilot's per-seed differences, with replacement."""
    values = [float(value) for value in differences]

    def draw(rng: np.random.Generator, experiments: int, pairs: int) -> np.ndarray:
        import numpy as np

        return np.asarray(values)[rng.integers(0, len(values), size=(experiments, pairs))]

    return draw


def normal_sampler(effect: float, spread: float) -> Sampler:
    """Experiments of normal per-seed differences with mean `effect` and standard deviation `spread`."""

    def draw(rng: np.random.Generator, experiments: int, pairs: int) -> np.ndarray:
        return effect + spread * rng.standard_normal((experiments, pairs))

    return draw


def seeds_needed_paired(differences: Sequence[float], *, variants: int = 1) -> int | None:
    """Pairs that would resolve a difference like the observed one, simulated from the observed differences; never
    fewer than n + 1 when these n did not resolve. None when every difference is 0 (nothing to resolve) or more than
    MAX_PLANNED_SEEDS are needed."""
    if not differences or all(value == 0 for value in differences):
        return None
    n = len(differences)
    return seeds_for_power(pilot_sampler(differences), at_least=n + 1, variants=variants)


def smallest_effect(spread: float, pairs: int, *, variants: int = 1) -> float | None:
    """The smallest mean difference (normal, standard deviation `spread`) resolved with POWER_TARGET power at `pairs`
    seeds (bisection on simulations with the same draws); None when `pairs` can resolve nothing."""
    if spread <= 0 or power(normal_sampler(1e6 * spread, spread), pairs, variants=variants) < POWER_TARGET:
        return None
    low, high = 0.0, spread
    while power(normal_sampler(high, spread), pairs, variants=variants) < POWER_TARGET:
        low, high = high, high * 2
    for _ in range(20):
        middle = (low + high) / 2
        low, high = (
            (middle, high)
            if power(normal_sampler(middle, spread), pairs, variants=variants) < POWER_TARGET
            else (low, middle)
        )
    return high


def plan_power(
    *,
    seeds_planned: int,
    variants: int,
    pilot: Sequence[float] | None = None,
    effect: float | None = None,
    spread: float | None = None,
    source: str,
) -> PowerPlan:
    """From a pilot's per-seed differences, or a stated effect and spread: seeds for 80 % power, the power at the
    seeds planned, and the smallest effect resolvable there."""
    if pilot is not None:
        sampler = pilot_sampler(pilot)
        spread = statistics.stdev(pilot) if len(pilot) >= 2 else None
    else:
        assert effect is not None and spread is not None
        sampler = normal_sampler(effect, spread)
    return PowerPlan(
        source=source,
        variants=variants,
        seeds_planned=seeds_planned,
        power_at_planned=power(sampler, seeds_planned, variants=variants),
        seeds_needed=seeds_for_power(sampler, at_least=2, variants=variants),
        smallest_effect=smallest_effect(spread, seeds_planned, variants=variants) if spread else None,
    )
