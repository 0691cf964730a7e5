"""Is a difference between two arms real, or seed noise? Small-sample statistics over replicates (one episode per seed).

Methods, stated wherever a number is shown:
- a mean with its Student t 95 % interval (a percentile bootstrap covered 75 % at 3 values and 85–89 % at 6–8);
- a difference of means with Welch's t interval and a two-sided permutation test (exact when there are at most 20,000
  ways to split the pooled values, else 20,000 random splits);
- "distinguishable from seed noise" when the test's p < 0.05 and the interval excludes 0;
- otherwise "not resolved", and how many seeds per arm would resolve a difference of this size (a two-sample normal
  approximation at 80 % power, never fewer than the 4 per arm an exact test needs to reach p < 0.05, nor than one
  more than were run); "no difference" only when every value of both arms is the same;
- milestones: reached k/n (steps to one are a time to an event: stats/survival.py).
Random splits come from a generator seeded with a fixed number, so the same data always gives the same p; numpy is
imported inside the functions: `compare` is a light command.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel

EXACT_SPLITS_MAX = 20_000
RANDOM_SPLITS = 20_000
SPLIT_CHUNK = 2_000  # random splits drawn at once
RESAMPLE_SEED = 20_261_201
CONFIDENCE = 0.95
ALPHA = 0.05
Z_ALPHA = 1.959964  # two-sided 0.05
Z_POWER = 0.841621  # 80 % power
MIN_SEEDS_EXACT = 4  # per arm: the fewest with which an exact two-sided test can give p < 0.05 (2 / C(8, 4))
MEAN_INTERVAL_METHOD = "Student t 95% interval of the mean"
METHOD = (
    "Welch t 95% interval of the difference of means (Welch–Satterthwaite degrees of freedom, rounded down); "
    "two-sided permutation test (exact up to 20,000 splits); distinguishable when p < 0.05 and the interval excludes 0"
)


class Interval(BaseModel):
    low: float
    high: float

    def text(self, digits: int = 2) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


class Summary(BaseModel):
    """One metric over an arm's replicates."""

    n: int
    mean: float | None
    std: float | None  # sample standard deviation; None below 2 values
    ci: Interval | None  # None below 2 values: no interval can be given
    values: list[float]

    def text(self, digits: int = 2) -> str:
        if self.mean is None:
            return ""
        if self.ci is None:
            return f"{self.mean:.{digits}f} (n = {self.n}: no interval)"
        return f"{self.mean:.{digits}f} {self.ci.text(digits)} (n = {self.n})"


class MilestoneStats(BaseModel):
    task: str
    identity: str
    reached: int
    n: int
    step: int | None  # one episode: the step it was reached at; several: None (the arm's Kaplan–Meier curve says
    # when: a summary of the episodes that reached it alone would favour an arm that rarely does)
    available: bool = True

    def text(self) -> str:
        if not self.available:
            return "n/a"
        head = f"{self.reached}/{self.n}"
        return head if self.step is None else f"{head} @ {self.step}"


class Difference(BaseModel):
    """A − B for one metric, and whether it stands out from seed noise at the n that was run."""

    metric: str
    n_a: int
    n_b: int
    estimate: float | None
    ci: Interval | None
    p_value: float | None
    distinguishable: bool
    seeds_needed: int | None  # per arm, to resolve a difference of this size; None when none was observed
    text: str


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def quantile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted values."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Student's t interval of the mean (None below 2 values): exact for normal values, and measured at 3–12 on
    score-like ones (tests/bench/bench_small_n_stats.py). Zero spread gives the point (every value equal)."""
    if len(values) < 2:
        return None
    centre = statistics.fmean(values)
    half = t_quantile(confidence, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(low=centre - half, high=centre + half)


def summarise(values: Sequence[float]) -> Summary:
    values = [float(value) for value in values]
    return Summary(
        n=len(values),
        mean=mean(values) if values else None,
        std=statistics.stdev(values) if len(values) >= 2 else None,
        ci=mean_interval(values),
        values=values,
    )


def permutation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided: the share of splits of the pooled values into groups of len(a) and len(b) whose difference of means
    is at least as far from 0 as the observed one."""
    pooled = [*a, *b]
    observed = abs(mean(a) - mean(b))
    total = sum(pooled)
    size_a, size_b = len(a), len(b)
    tolerance = 1e-9 * max(1.0, observed)

    def extreme(group_a: Sequence[float]) -> bool:
        sum_a = sum(group_a)
        return abs(sum_a / size_a - (total - sum_a) / size_b) >= observed - tolerance

    if math.comb(len(pooled), size_a) <= EXACT_SPLITS_MAX:
        splits = list(itertools.combinations(pooled, size_a))
        return sum(extreme(split) for split in splits) / len(splits)
    return (_random_split_hits(pooled, size_a, observed - tolerance) + 1) / (RANDOM_SPLITS + 1)


def _random_split_hits(pooled: Sequence[float], size_a: int, threshold: float) -> int:
    """Of RANDOM_SPLITS seeded random splits (numpy, in chunks of SPLIT_CHUNK rows: memory bounded by a chunk), how
    many give a difference of means at least `threshold` from 0."""
    import numpy as np

    values = np.asarray(pooled, dtype=float)
    total, size_b = values.sum(), len(values) - size_a
    rng = np.random.default_rng(RESAMPLE_SEED)
    hits = 0
    for start in range(0, RANDOM_SPLITS, SPLIT_CHUNK):
        rows = min(SPLIT_CHUNK, RANDOM_SPLITS - start)
        order = rng.random((rows, len(values))).argsort(axis=1)[:, :size_a]
        sums_a = values[order].sum(axis=1)
        hits += int(np.count_nonzero(np.abs(sums_a / size_a - (total - sums_a) / size_b) >= threshold))
    return hits


def difference_interval(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Welch's t interval of mean(a) − mean(b) (None below 2 values an arm): the arms' variances need not be equal.
    Its degrees of freedom (Welch–Satterthwaite) are rounded down, which widens it a little. Zero spread in both arms
    gives the point."""
    if len(a) < 2 or len(b) < 2:
        return None
    centre = mean(a) - mean(b)
    share_a, share_b = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if share_a + share_b == 0:
        return Interval(low=centre, high=centre)
    degrees = (share_a + share_b) ** 2 / (share_a**2 / (len(a) - 1) + share_b**2 / (len(b) - 1))
    half = t_quantile(confidence, max(1, math.floor(degrees))) * math.sqrt(share_a + share_b)
    return Interval(low=centre - half, high=centre + half)


def seeds_needed(a: Sequence[float], b: Sequence[float]) -> int | None:
    """Seeds per arm that would resolve a difference of the observed size at 80 % power (None: no difference)."""
    difference = abs(mean(a) - mean(b))
    if difference == 0:
        return None
    pooled = [value - mean(a) for value in a] + [value - mean(b) for value in b]
    degrees = len(a) + len(b) - 2
    variance = sum(value * value for value in pooled) / degrees if degrees > 0 else 0.0
    needed = 2 * variance * ((Z_ALPHA + Z_POWER) / difference) ** 2
    return max(MIN_SEEDS_EXACT, math.ceil(needed))


def compare_means(metric: str, a: Sequence[float], b: Sequence[float], *, name_a: str, name_b: str) -> Difference:
    """`name_a − name_b` for `metric`: the estimate, its interval, the test, and the verdict in words."""
    a, b = [float(value) for value in a], [float(value) for value in b]
    if not a or not b:
        return Difference(
            metric=metric,
            n_a=len(a),
            n_b=len(b),
            estimate=None,
            ci=None,
            p_value=None,
            distinguishable=False,
            seeds_needed=None,
            text=f"{metric}: no runs to compare",
        )
    estimate = mean(a) - mean(b)
    head = f"{metric}: {name_a} − {name_b} = {estimate:+.2f}"
    if len(a) < 2 or len(b) < 2:
        text = f"{head}; n = {len(a)} + {len(b)}: no interval can be given (run more seeds: `--seeds 0-4`)"
        return Difference(
            metric=metric,
            n_a=len(a),
            n_b=len(b),
            estimate=estimate,
            ci=None,
            p_value=None,
            distinguishable=False,
            seeds_needed=seeds_needed(a, b),
            text=text,
        )
    interval = difference_interval(a, b)
    p_value = permutation_p(a, b)
    assert interval is not None
    distinguishable = p_value < ALPHA and (interval.low > 0 or interval.high < 0)
    needed = seeds_needed(a, b)
    if needed is not None and not distinguishable:
        needed = max(needed, max(len(a), len(b)) + 1)  # these n did not resolve it
    head += f" {interval.text()} (permutation p = {p_value:.3f})"
    if distinguishable:
        text = f"{head}; distinguishable from seed noise at n = {len(a)} + {len(b)}"
    elif len({*a, *b}) == 1:
        text = f"{head}; no difference: every value is the same at n = {len(a)} + {len(b)}"
    else:
        text = f"{head}; not resolved at n = {len(a)} + {len(b)}"
        if needed is not None:
            text += f"; about {needed} seeds per arm would resolve a difference of this size"
    return Difference(
        metric=metric,
        n_a=len(a),
        n_b=len(b),
        estimate=estimate,
        ci=interval,
        p_value=p_value,
        distinguishable=distinguishable,
        seeds_needed=needed,
        text=text,
    )


def milestone_stats(task: str, identity: str, steps: Sequence[int | None], *, available: bool = True) -> MilestoneStats:
    """Reached k/n; with one episode, the step it was reached at."""
    reached = [step for step in steps if step is not None]
    return MilestoneStats(
        task=task,
        identity=identity,
        reached=len(reached),
        n=len(steps),
        step=reached[0] if len(steps) == 1 and reached else None,
        available=available,
    )


def t_quantile(confidence: float, degrees: int) -> float:
    """The two-sided Student t critical value: P(|T| ≤ t) = confidence with `degrees` (≥ 1) degrees of freedom, by
    bisection on the exact finite-series CDF for integer degrees (Abramowitz & Stegun 26.7.3–4)."""
    low, high = 0.0, 1.0
    while _t_central(high, degrees) < confidence:
        low, high = high, high * 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_central(middle, degrees) < confidence else (low, middle)
    return (low + high) / 2


def _t_central(t: float, degrees: int) -> float:
    """P(|T| ≤ t) for Student's t with integer `degrees`."""
    theta = math.atan(t / math.sqrt(degrees))
    cosine_squared = math.cos(theta) ** 2
    if degrees % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, (degrees - 1) // 2 + 1):  # cosθ·(1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …)
            total += term
            term *= cosine_squared * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 0.0
    for k in range(1, degrees // 2 + 1):  # sinθ·(1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …)
        total += term
        term *= cosine_squared * (2 * k - 1) / (2 * k)
    return math.sin(theta) * total
