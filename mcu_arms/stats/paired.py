"""A − B paired by seed: per-seed differences, an exact sign-flip permutation test, the t interval of their mean,
and what the pairing bought (the correlation between the arms, the variance of the paired vs the unpaired difference).

Under "no difference" the sign of each seed's difference is a fair coin, whatever the world's difficulty: the test
counts the sign vectors whose mean difference is at least as far from 0 as the observed one (all 2^n of them up to
2^20 = EXACT_SIGNS_MAX_PAIRS pairs, else SIGN_FLIP_RESAMPLES seeded random ones with the (hits + 1) / (N + 1) rule).
The interval is Student's t of the mean difference (stats/basics.mean_interval), chosen by simulation
(tests/bench/bench_small_n_stats.py). numpy is imported inside the functions: `compare` is a light command.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from mcu_arms.stats.basics import ALPHA, CONFIDENCE, RESAMPLE_SEED, Interval, mean_interval
from mcu_arms.stats.power import MAX_PLANNED_SEEDS, seeds_needed_paired

if TYPE_CHECKING:
    import numpy as np

EXACT_SIGNS_MAX_PAIRS = 20  # 2^20 sign vectors: enumerated; more pairs are sampled
SIGN_FLIP_RESAMPLES = 100_000
SIGN_FLIP_METHOD = "exact two-sided sign-flip permutation test over all 2^n signs"
SIGN_FLIP_MC_METHOD = (
    f"two-sided sign-flip permutation test, {SIGN_FLIP_RESAMPLES:,} seeded random signs, (hits+1)/(N+1)"
)
T_INTERVAL_METHOD = f"paired Student t {CONFIDENCE:.0%} interval of the mean difference"
PAIRED_VERDICT_RULE = f"distinguishable when p < {ALPHA} and the interval excludes 0"


class PairingEffect(BaseModel):
    """What pairing by seed bought: a positive correlation between the arms makes the paired difference less noisy."""

    correlation: float | None  # Pearson, between the arms' values over the seeds; None when an arm does not vary
    variance_paired: float | None  # sample variance of the per-seed differences
    variance_unpaired: float | None  # var(A) + var(B): what the differences' variance would be without pairing
    method: str = "Pearson correlation; sample variances of A − B per seed and of A plus B"

    def text(self) -> str:
        if self.variance_paired is None or self.variance_unpaired is None:
            return "pairing: fewer than 2 seeds"
        correlation = "n/a" if self.correlation is None else f"{self.correlation:+.2f}"
        return (
            f"pairing: correlation {correlation}; variance of the difference {self.variance_paired:.3g} paired vs "
            f"{self.variance_unpaired:.3g} unpaired"
        )


class SignFlipTest(BaseModel):
    p_value: float
    exact: bool  # all 2^n signs; else Monte Carlo
    resamples: int  # sign vectors counted (2^n when exact)
    method: str


class PairedDifference(BaseModel):
    """mean(A − B) over the seeds both arms ran, its interval, the test, the verdict and the seeds-needed figure."""

    metric: str
    design: str = "paired"
    seeds: list[int]
    differences: list[float]  # A − B, in the order of `seeds`
    n: int
    estimate: float | None
    ci: Interval | None
    ci_method: str = T_INTERVAL_METHOD
    test: SignFlipTest | None
    p_value: float | None
    distinguishable: bool
    seeds_needed: int | None  # pairs that would resolve a difference of this size; None when there is none
    effect: PairingEffect
    verdict_rule: str = PAIRED_VERDICT_RULE
    text: str


def differences_by_seed(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[list[int], list[float]]:
    """The seeds both arms ran, in order, and A − B for each."""
    seeds = sorted(set(a) & set(b))
    return seeds, [float(a[seed]) - float(b[seed]) for seed in seeds]


def _tolerance(observed: float) -> float:
    return 1e-9 * max(1.0, abs(observed))


def sign_flip_sums(differences: Sequence[float] | np.ndarray) -> np.ndarray:
    """Σ s_i·d_i for every sign vector s (index bit i set: s_i = −1), built by doubling: 2^n values."""
    import numpy as np

    sums = np.zeros(1)
    for difference in differences:
        sums = np.concatenate((sums + difference, sums - difference))
    return sums


def random_sign_sums(values: np.ndarray, seed: int, resamples: int = SIGN_FLIP_RESAMPLES) -> Iterator[np.ndarray]:
    """Σ s·d for `resamples` seeded random sign vectors, in chunks. With b a fair bit, Σ (2b − 1)·d = 2·(b·d) − Σ d;
    b·d is read a byte at a time from a table of the 256 subset sums of each 8 consecutive values."""
    import numpy as np

    groups = -(-len(values) // 8)
    padded = np.zeros(groups * 8)
    padded[: len(values)] = values
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # byte -> its 8 bits, low bit first
    table = padded.reshape(groups, 8) @ bits.T  # group, byte -> the sum of the values whose bits are set
    rng = np.random.default_rng(seed)
    chunk = max(1, 4_000_000 // groups)
    for start in range(0, resamples, chunk):
        drawn = rng.integers(0, 256, size=(min(chunk, resamples - start), groups))
        chosen = table[0][drawn[:, 0]]  # a column at a time: a fifth of the time of one 2-D gather and row sum
        for group in range(1, groups):
            chosen += table[group][drawn[:, group]]
        yield 2 * chosen - values.sum()


def sign_flip_test(differences: Sequence[float] | np.ndarray, *, seed: int = RESAMPLE_SEED) -> SignFlipTest:
    """Two-sided: the share of sign vectors whose |Σ s·d| is at least the observed |Σ d| (Σ or mean: the same test)."""
    import numpy as np

    values = np.asarray(differences, dtype=float)
    observed = abs(float(values.sum()))
    threshold = observed - _tolerance(observed)
    if len(values) <= EXACT_SIGNS_MAX_PAIRS:
        sums = sign_flip_sums(values)
        return SignFlipTest(
            p_value=float(np.count_nonzero(np.abs(sums) >= threshold)) / len(sums),
            exact=True,
            resamples=len(sums),
            method=SIGN_FLIP_METHOD,
        )
    hits = sum(int(np.count_nonzero(np.abs(sums) >= threshold)) for sums in random_sign_sums(values, seed))
    return SignFlipTest(
        p_value=(hits + 1) / (SIGN_FLIP_RESAMPLES + 1),
        exact=False,
        resamples=SIGN_FLIP_RESAMPLES,
        method=SIGN_FLIP_MC_METHOD,
    )


def pairing_effect(a: Sequence[float], b: Sequence[float]) -> PairingEffect:
    """Over the seeds both ran (a[i] and b[i] are one seed): the correlation, and the paired vs unpaired variance."""
    if len(a) < 2:
        return PairingEffect(correlation=None, variance_paired=None, variance_unpaired=None)
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    correlation = statistics.correlation(a, b) if var_a > 0 and var_b > 0 else None
    paired = statistics.variance([x - y for x, y in zip(a, b, strict=True)])
    return PairingEffect(correlation=correlation, variance_paired=paired, variance_unpaired=var_a + var_b)


def compare_paired(
    metric: str, a: Mapping[int, float], b: Mapping[int, float], *, name_a: str, name_b: str, variants: int = 1
) -> PairedDifference:
    """`name_a − name_b` for `metric`, paired over the seeds both arms ran (a and b: seed -> value); `variants`: how
    many arms are compared with the same baseline (the seeds needed are for resolving in a Holm family that size)."""
    seeds, differences = differences_by_seed(a, b)
    n = len(seeds)
    effect = pairing_effect([float(a[s]) for s in seeds], [float(b[s]) for s in seeds])
    if not seeds:
        return PairedDifference(
            metric=metric,
            seeds=[],
            differences=[],
            n=0,
            estimate=None,
            ci=None,
            test=None,
            p_value=None,
            distinguishable=False,
            seeds_needed=None,
            effect=effect,
            text=f"{metric}: no seed that both arms ran",
        )
    estimate = statistics.fmean(differences)
    needed = seeds_needed_paired(differences, variants=variants)
    head = f"{metric}: {name_a} − {name_b} = {estimate:+.2f}"
    if n < 2:
        return PairedDifference(
            metric=metric,
            seeds=seeds,
            differences=differences,
            n=n,
            estimate=estimate,
            ci=None,
            test=None,
            p_value=None,
            distinguishable=False,
            seeds_needed=needed,
            effect=effect,
            text=f"{head}; n = 1 pair: no interval can be given (run more seeds)",
        )
    interval = mean_interval(differences)
    test = sign_flip_test(differences)
    assert interval is not None
    distinguishable = test.p_value < ALPHA and (interval.low > 0 or interval.high < 0)
    head += f" {interval.text()} (paired, sign-flip p = {test.p_value:.3g})"
    if distinguishable:
        text = f"{head}; distinguishable from seed noise (paired, n = {n})"
    elif all(difference == 0 for difference in differences):
        text = f"{head}; no difference: every paired difference is 0 (paired, n = {n})"
    else:
        text = f"{head}; not resolved (paired, n = {n}): the interval holds every difference from its low to its high"
        text += (
            f"; about {needed} paired seeds would resolve a difference like this one with 80% power"
            if needed is not None
            else f"; more than {MAX_PLANNED_SEEDS} paired seeds would be needed to resolve a difference like this one"
        )
    return PairedDifference(
        metric=metric,
        seeds=seeds,
        differences=differences,
        n=n,
        estimate=estimate,
        ci=interval,
        test=test,
        p_value=test.p_value,
        distinguishable=distinguishable,
        seeds_needed=needed,
        effect=effect,
        text=text,
    )
