"""Run until resolved, without the peeking problem: a group-sequential exact sign-flip test.

Looking at a fixed-n test after every batch and stopping when p < 0.05 rejects far more often than 5 % when nothing
differs. Here each look k (n_k paired seeds of a planned maximum N) may spend only the Lan–DeMets O'Brien–Fleming-type
share of alpha, α(t) = 2 − 2Φ(z_{1−α/2} / √t) at information t = n_k / N: almost nothing early, nearly all of it at N.
The boundary of look k is set on the exact sign-flip distribution itself, conditional on the absolute differences
seen so far: c_k is the smallest |Σ s·|d|| such that the sign vectors that would not have stopped at an earlier look
(their sums below the earlier, already fixed boundaries) and reach c_k have probability ≤ α(t_k) − what the earlier
looks spent. Under "no difference" the signs are fair coins given the absolute values, so the chance of ever
rejecting is at most α(t_last) ≤ α, however many looks are taken, exactly (all 2^n signs up to 2^20, else Monte Carlo).
With several variants each gets alpha / variants (Bonferroni), so "every variant resolved" holds at alpha jointly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import BaseModel

from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.stats.basics import ALPHA, RESAMPLE_SEED
from mcu_arms.stats.paired import EXACT_SIGNS_MAX_PAIRS, SIGN_FLIP_RESAMPLES, sign_flip_sums, sign_flip_test
from mcu_arms.stats.power import POWER_SIMULATIONS, Sampler

if TYPE_CHECKING:
    import numpy as np

DEFAULT_MAX_SEEDS = 12  # with batches of 4: looks at 4, 8 and 12 seeds; a same-sign difference resolves at 8
DEFAULT_BATCH = 4
PrimaryMetric = Literal["score", "sim_score", "milestones"]  # the score, the normalised sim score, milestones reached
PRIMARY_METRICS: tuple[str, ...] = get_args(PrimaryMetric)
DEFAULT_PRIMARY: PrimaryMetric = "score"
SEQUENTIAL_METHOD = (
    "group-sequential exact sign-flip test (paired by seed), Lan–DeMets alpha spending with O'Brien–Fleming-type "
    "bounds; Bonferroni over the variants"
)


def primary_value(
    primary: PrimaryMetric, *, score: float | None, sim_score: float | None, milestones_reached: int
) -> float | None:
    """The stopping rule's metric of one finished episode: its score, its normalised simulator score, or the number
    of milestones it reached (what `run --until-resolved` reads and what `compare` tests again)."""
    if primary == "milestones":
        return float(milestones_reached)
    value = score if primary == "score" else sim_score
    return None if value is None else float(value)


def obf_alpha_spent(fraction: float, alpha: float) -> float:
    """The cumulative alpha the Lan–DeMets O'Brien–Fleming-type spending function allows at information `fraction`."""
    if fraction <= 0:
        return 0.0
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return min(alpha, 2 - 2 * NormalDist().cdf(z / math.sqrt(min(1.0, fraction))))


class Look(BaseModel):
    look: int
    n: int  # paired seeds up to and including this look
    fraction: float  # information: n / max_seeds
    alpha_allowed: float  # cumulative alpha the spending function allows here
    alpha_spent: float  # cumulative alpha actually spent (≤ allowed: the sign-flip distribution is discrete)
    boundary: float | None  # stop when |mean difference| reaches this; None: no outcome could stop here
    mean_difference: float
    nominal_p: float  # the fixed-n sign-flip p of this look's seeds alone (not a valid p across looks)
    rejected: bool


class SequentialTest(BaseModel):
    """One variant against the baseline on the primary metric, look by look, until it crossed or the looks ended."""

    alpha: float  # this test's share
    max_seeds: int
    looks: list[Look]  # the looks taken by this test (it stops at the first that rejects)
    rejected: bool
    method: str = SEQUENTIAL_METHOD

    @property
    def alpha_spent(self) -> float:
        return self.looks[-1].alpha_spent if self.looks else 0.0


def _prefix_sums(absolute: np.ndarray, size: int, total: int) -> np.ndarray:
    """|Σ s·|d|| over the first `size` differences, for each of the 2^total sign vectors (index bits as in
    sign_flip_sums, so the first `size` are the low bits)."""
    import numpy as np

    return np.tile(np.abs(sign_flip_sums(absolute[:size])), 2 ** (total - size))


def _sampled_prefix_sums(absolute: np.ndarray, sizes: Sequence[int], seed: int) -> list[np.ndarray]:
    """|Σ s·|d|| over the first `size` differences for each look's size, for SIGN_FLIP_RESAMPLES seeded sign vectors."""
    import numpy as np

    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(SIGN_FLIP_RESAMPLES, sizes[-1]))
    running = np.cumsum(signs * absolute[: sizes[-1]], axis=1)
    return [np.abs(running[:, size - 1]) for size in sizes]


def sequential_sign_flip(
    differences: Sequence[float],
    look_sizes: Sequence[int],
    *,
    max_seeds: int,
    alpha: float = ALPHA,
    seed: int = RESAMPLE_SEED,
) -> SequentialTest:
    """The group-sequential test over `differences` (A − B per seed, in the order they were run), looked at after the
    first look_sizes[k] of them. Stops at the first look whose |Σ d| reaches its boundary."""
    import numpy as np

    values = np.asarray(differences, dtype=float)
    absolute = np.abs(values)
    boundaries: list[float] = []
    looks: list[Look] = []
    for index, size in enumerate(look_sizes):
        sizes = list(look_sizes[: index + 1])
        if size <= EXACT_SIGNS_MAX_PAIRS:
            sums = [_prefix_sums(absolute, earlier, size) for earlier in sizes]
        else:
            sums = _sampled_prefix_sums(absolute, sizes, seed + index)
        total = len(sums[-1])
        alive = np.ones(total, dtype=bool)
        for earlier, boundary in zip(sums[:-1], boundaries, strict=True):
            if math.isfinite(boundary):
                alive &= earlier < boundary - 1e-9 * max(1.0, boundary)
        spent_before = 1 - np.count_nonzero(alive) / total
        allowed = obf_alpha_spent(size / max_seeds, alpha)
        current = np.sort(sums[-1][alive])
        candidates = np.unique(np.round(current, 9))
        counts = len(current) - np.searchsorted(current, candidates - 1e-9 * np.maximum(1.0, candidates))
        fits = np.nonzero(spent_before + counts / total <= allowed + 1e-15)[0]
        boundary = float(candidates[fits[0]]) if len(fits) else math.inf
        boundaries.append(boundary)
        spent = spent_before + (counts[fits[0]] / total if len(fits) else 0.0)
        observed = abs(float(values[:size].sum()))
        rejected = math.isfinite(boundary) and observed >= boundary - 1e-9 * max(1.0, boundary)
        looks.append(
            Look(
                look=index + 1,
                n=size,
                fraction=min(1.0, size / max_seeds),
                alpha_allowed=allowed,
                alpha_spent=spent,
                boundary=boundary / size if math.isfinite(boundary) else None,
                mean_difference=float(values[:size].mean()),
                nominal_p=sign_flip_test(values[:size]).p_value,
                rejected=rejected,
            )
        )
        if rejected:
            break
    return SequentialTest(alpha=alpha, max_seeds=max_seeds, looks=looks, rejected=bool(looks and looks[-1].rejected))


def ordered_by_look(look_of_seed: Mapping[int, int]) -> tuple[list[int], list[int]]:
    """Seeds in the order they were run (look, then seed) and the cumulative number of seeds after each look."""
    seeds = sorted(look_of_seed, key=lambda seed: (look_of_seed[seed], seed))
    looks = sorted(set(look_of_seed.values()))
    return seeds, [sum(1 for seed in seeds if look_of_seed[seed] <= look) for look in looks]


def sequential_compare(
    a: Mapping[int, float], b: Mapping[int, float], look_of_seed: Mapping[int, int], design: SequentialLook
) -> SequentialTest:
    """A variant (a) against the baseline (b), seed -> primary metric, over the seeds both ran, looked at as run."""
    common = {seed: look for seed, look in look_of_seed.items() if seed in a and seed in b}
    seeds, sizes = ordered_by_look(common)
    return sequential_sign_flip(
        [float(a[s]) - float(b[s]) for s in seeds],
        sizes,
        max_seeds=design.max_seeds,
        alpha=design.alpha / design.comparisons,
    )


def resolved(tests: Sequence[SequentialTest]) -> bool:
    """The stopping rule: every variant's test has crossed its boundary."""
    return bool(tests) and all(test.rejected for test in tests)


class SequentialExperiment(BaseModel):
    """What a fixed-n reading of these episodes must say: they were run sequentially, with this design."""

    method: str
    primary: str
    alpha: float
    comparisons: int
    max_seeds: int
    looks: list[int]  # seeds (per arm) after each look taken
    alpha_allowed: float  # by the spending function at the last look, over the whole family (what was spent, ≤
    # this, is each variant's test's: the score line of `compare`)
    text: str


def sequential_experiment(records: Sequence[SequentialLook | None]) -> SequentialExperiment | None:
    """From the episodes' recorded looks (one per episode of one arm, None for a fixed-n episode): the design, the
    looks taken and the alpha the spending function allowed by the last; None when no episode was part of a
    sequential run. A ValueError when the looks hold more seeds than their own maximum (the experiment is then
    unreadable)."""
    recorded = [record for record in records if record is not None]
    if not recorded:
        return None
    design = max(recorded, key=lambda record: record.look)
    per_look: dict[int, int] = {}
    for record in recorded:
        per_look[record.look] = per_look.get(record.look, 0) + 1
    looks, total = [], 0
    for look in sorted(per_look):
        total += per_look[look]
        looks.append(total)
    if looks[-1] > design.max_seeds:
        raise ValueError(
            f"its looks hold {looks[-1]} episodes, more than their own maximum of {design.max_seeds} seeds: "
            "not one sequential run's design"
        )
    allowed = design.comparisons * obf_alpha_spent(looks[-1] / design.max_seeds, design.alpha / design.comparisons)
    text = (
        f"sequential experiment (run --until-resolved, primary metric {design.primary}): {len(looks)} look"
        f"{'s' if len(looks) > 1 else ''} at {', '.join(map(str, looks))} seeds of at most {design.max_seeds}; alpha "
        f"allowed by its last look {allowed:.4f} of {design.alpha:g} ({SEQUENTIAL_METHOD}); compare reads the "
        "sequential test's verdict, and a fixed-n p-value of these episodes overstates the evidence"
    )
    return SequentialExperiment(
        method=SEQUENTIAL_METHOD,
        primary=design.primary,
        alpha=design.alpha,
        comparisons=design.comparisons,
        max_seeds=design.max_seeds,
        looks=looks,
        alpha_allowed=allowed,
        text=text,
    )


def look_sizes(max_seeds: int, batch: int) -> list[int]:
    """The seeds per arm after each look of `run --until-resolved`: a batch at a time, the last at max_seeds."""
    return [min(size, max_seeds) for size in range(batch, max_seeds + batch, batch)]


class SequentialPower(BaseModel):
    """What `run --until-resolved` would do with differences like these, by simulation of its own stopping rule."""

    max_seeds: int
    batch: int
    looks: list[int]  # seeds per arm after each look
    variants: int
    power: float  # share of simulated experiments in which a variant's test resolves by max_seeds
    power_every_variant: float  # ... in which every variant's does (the run stops early only then)
    expected_seeds: float  # seeds per arm the run takes on average (resolved early, or max_seeds)
    stopped_at: dict[int, float]  # seeds per arm -> share of simulated runs that stopped there
    method: str = (
        f"{POWER_SIMULATIONS:,} seeded simulated runs of the stopping rule applied: the group-sequential exact "
        "sign-flip test of each variant at alpha / variants, every variant's differences drawn alike and "
        "independently; the run stops when every variant is resolved, or at max_seeds"
    )


def sequential_power(
    sampler: Sampler,
    *,
    max_seeds: int = DEFAULT_MAX_SEEDS,
    batch: int = DEFAULT_BATCH,
    variants: int = 1,
    alpha: float = ALPHA,
    seed: int = RESAMPLE_SEED,
) -> SequentialPower:
    """Power and seeds used of `run --until-resolved` when every variant's per-seed differences come from `sampler`."""
    import numpy as np

    sizes = look_sizes(max_seeds, batch)
    rng = np.random.default_rng([seed, max_seeds, batch, variants])
    data = sampler(rng, POWER_SIMULATIONS * variants, max_seeds).reshape(POWER_SIMULATIONS, variants, max_seeds)
    first_resolved = np.full((POWER_SIMULATIONS, variants), np.inf)  # seeds at the look a variant crossed
    for run, variant in np.ndindex(POWER_SIMULATIONS, variants):
        test = sequential_sign_flip(list(data[run, variant]), sizes, max_seeds=max_seeds, alpha=alpha / variants)
        if test.rejected:
            first_resolved[run, variant] = test.looks[-1].n
    stopped = np.minimum(first_resolved.max(axis=1), max_seeds)
    return SequentialPower(
        max_seeds=max_seeds,
        batch=batch,
        looks=sizes,
        variants=variants,
        power=float(np.isfinite(first_resolved).mean()),
        power_every_variant=float(np.isfinite(first_resolved).all(axis=1).mean()),
        expected_seeds=float(stopped.mean()),
        stopped_at={size: float((stopped == size).mean()) for size in sizes},
    )
