"""Steps to a milestone as time to an event: an episode that did not reach it is censored at the steps it ran.

Per arm, the Kaplan–Meier estimate of "not reached yet" by step, with a pointwise band (Greenwood's variance on the
log(−log) scale, which keeps it inside [0, 1]); the median steps-to-milestone with its interval (the steps where the
band's lower and upper curves cross 0.5; None: not reached); the probability of reaching it by the step cap. Between
two arms, the log-rank test with its p by permutation (the chi-square approximation is 0.06–0.10 liberal at 3–8
episodes per arm): exact over every split of the episodes (or every swap within a seed, when the design pairs them by
seed) up to PERMUTATIONS_EXACT_MAX of them, else PERMUTATIONS_RANDOM seeded random ones with (hits + 1) / (N + 1).
A "median of the episodes that reached it" would favour an arm that rarely reaches it. The median follows R survival's
convention (`print.survfit`): the smallest step with S ≤ ½, except on a plateau at exactly ½, where it is the midpoint
between the plateau's start and the next step where S drops below ½ (the start when there is none); lifelines takes
the plateau's start. numpy is imported inside the permutation test: `compare` is a light command.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel

from mcu_arms.stats.basics import CONFIDENCE, RESAMPLE_SEED, Interval

if TYPE_CHECKING:
    import numpy as np

PERMUTATIONS_EXACT_MAX = 20_000  # splits (or within-seed swaps) enumerated; more are sampled
PERMUTATIONS_RANDOM = 20_000
PERMUTATION_CHUNK = 2_000  # random permutations drawn at once
PLATEAU_TOLERANCE = 1e-9  # S within this of ½ is a plateau at ½ (a product of fractions lands either side)
KM_METHOD = f"Kaplan–Meier, censored at the steps run; {CONFIDENCE:.0%} band: Greenwood, log(−log) scale"
MEDIAN_METHOD = (
    "median of the Kaplan–Meier curve, R survival's convention (midpoint of a plateau at exactly 0.5); interval where "
    "the band crosses 0.5"
)
LOGRANK_METHOD = (
    "two-sided log-rank test, p by permutation (exact up to 20,000 splits, else 20,000 seeded random ones, "
    "(hits+1)/(N+1); within seeds when paired); no test below 2 episodes per arm"
)


class TimeToEvent(NamedTuple):
    """One episode: `steps` is when the milestone was reached (reached) or the steps it ran (censored). A plain tuple:
    an input, made thousands of times per compare."""

    steps: float
    reached: bool


class KaplanMeierPoint(BaseModel):
    step: float
    at_risk: int
    reached: int  # episodes reaching it at this step
    censored: int  # episodes that ended at this step without it
    not_reached: float  # S(step): the share still without the milestone just after this step
    band: Interval  # pointwise band of S(step)


class ReachingCurve(BaseModel):
    """1 − S by step: the share of episodes that reached the milestone, with its band — what `--plot` and the viewer
    draw, a step function starting at (0, 0)."""

    steps: list[float]  # 0, then each step at which an episode reached it or ended
    reached: list[float]
    low: list[float]  # 1 − the band's upper S
    high: list[float]  # 1 − the band's lower S


class KaplanMeier(BaseModel):
    n: int
    reached: int
    points: list[KaplanMeierPoint]  # one per distinct step at which an episode reached it or ended
    median: float | None  # steps to the milestone for half the episodes; None: not reached
    median_ci: tuple[float | None, float | None]  # None at an end: not reached within the data
    step_cap: float | None  # the last step observed
    reached_by_cap: float  # 1 − S(cap): probability of reaching it within the steps run
    reached_by_cap_band: Interval
    method: str = KM_METHOD
    median_method: str = MEDIAN_METHOD

    def reaching(self) -> ReachingCurve:
        return ReachingCurve(
            steps=[0.0, *(point.step for point in self.points)],
            reached=[0.0, *(1 - point.not_reached for point in self.points)],
            low=[0.0, *(1 - point.band.high for point in self.points)],
            high=[0.0, *(1 - point.band.low for point in self.points)],
        )

    def median_text(self) -> str:
        if self.median is None:
            return "not reached"
        low, high = (("not reached" if bound is None else f"{bound:g}") for bound in self.median_ci)
        return f"{self.median:g} [{low}, {high}]"


class LogRank(BaseModel):
    statistic: float | None  # chi-square; None when no episode of either arm reached it
    z: float | None  # signed (observed − expected reaching in A) / sd
    observed_a: int
    expected_a: float
    p_value: float | None  # by permutation; None: no test (no reach, or fewer than 2 episodes in an arm)
    chi_square_p: float | None = None  # the approximation lifelines and R print, for cross-checking only
    permutations: int = 0  # splits or swaps counted
    exact: bool = True  # every permutation; else seeded Monte Carlo
    paired: bool = False  # swaps within each seed, not splits of the pooled episodes
    method: str = LOGRANK_METHOD


def episodes(steps_reached: Sequence[int | None], steps_run: Sequence[int]) -> list[TimeToEvent]:
    """From the milestone's step per episode (None: not reached) and each episode's steps run."""
    return [
        TimeToEvent(steps=float(run if reached is None else reached), reached=reached is not None)
        for reached, run in zip(steps_reached, steps_run, strict=True)
    ]


def _grouped(data: Sequence[TimeToEvent]) -> list[tuple[float, int, int]]:
    """(step, reached, censored) per distinct step, in order."""
    counts: dict[float, list[int]] = {}
    for item in data:
        cell = counts.setdefault(item.steps, [0, 0])
        cell[0 if item.reached else 1] += 1
    return [(step, cell[0], cell[1]) for step, cell in sorted(counts.items())]


def _band(survival: float, greenwood: float, z: float) -> Interval:
    """Greenwood on the log(−log S) scale; degenerate where S is 0 or 1."""
    if survival <= 0.0 or survival >= 1.0 or math.isinf(greenwood):
        return Interval(low=survival, high=survival)
    log_s = math.log(survival)
    spread = z * math.sqrt(greenwood) / log_s  # negative: log S < 0
    return Interval(
        low=math.exp(-math.exp(math.log(-log_s) - spread)), high=math.exp(-math.exp(math.log(-log_s) + spread))
    )


def _first_at_or_below(points: list[KaplanMeierPoint], value_of, level: float) -> float | None:
    """The smallest step where value_of(point) ≤ level; on a plateau at exactly `level`, the midpoint between its
    start and the next step below it (R survival's convention), its start when none follows."""
    for index, point in enumerate(points):
        value = value_of(point)
        if value <= level + PLATEAU_TOLERANCE:
            if abs(value - level) > PLATEAU_TOLERANCE:
                return point.step
            below = next((p.step for p in points[index + 1 :] if value_of(p) < level - PLATEAU_TOLERANCE), None)
            return point.step if below is None else (point.step + below) / 2
    return None


def kaplan_meier(data: Sequence[TimeToEvent]) -> KaplanMeier:
    """The Kaplan–Meier curve of "not reached yet", its band, median and the probability of reaching it by the cap."""
    z = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
    at_risk, survival, greenwood = len(data), 1.0, 0.0
    points: list[KaplanMeierPoint] = []
    for step, reached, censored in _grouped(data):
        if reached:
            survival *= 1 - reached / at_risk
            greenwood += reached / (at_risk * (at_risk - reached)) if at_risk > reached else math.inf
        # validated: pydantic-core's __init__ is faster than the pure-Python model_construct (thousands per compare)
        points.append(
            KaplanMeierPoint(
                step=step,
                at_risk=at_risk,
                reached=reached,
                censored=censored,
                not_reached=survival,
                band=_band(survival, greenwood, z),
            )
        )
        at_risk -= reached + censored
    last = points[-1] if points else None
    return KaplanMeier(
        n=len(data),
        reached=sum(1 for item in data if item.reached),
        points=points,
        median=_first_at_or_below(points, lambda p: p.not_reached, 0.5),
        median_ci=(
            _first_at_or_below(points, lambda p: p.band.low, 0.5),
            _first_at_or_below(points, lambda p: p.band.high, 0.5),
        ),
        step_cap=last.step if last else None,
        reached_by_cap=1 - last.not_reached if last else 0.0,
        reached_by_cap_band=Interval(low=1 - last.band.high, high=1 - last.band.low)
        if last
        else Interval(low=0, high=0),
    )


def logrank(
    a: Sequence[TimeToEvent], b: Sequence[TimeToEvent], *, paired: bool = False, seed: int = RESAMPLE_SEED
) -> LogRank:
    """Does arm A reach the milestone sooner or later than arm B? Observed vs expected reaching at every step; the p by
    permutation of |z|. `paired`: a[i] and b[i] ran the same seed, and only the arms within each seed are swapped."""
    if paired and len(a) != len(b):
        raise ValueError("paired episodes come in pairs: one of each arm per seed")
    groups = (dict((step, (r, c)) for step, r, c in _grouped(a)), dict((step, (r, c)) for step, r, c in _grouped(b)))
    risk_a, risk_b = len(a), len(b)
    observed_a, expected_a, variance, any_reached = 0, 0.0, 0.0, False
    for step in sorted(set(groups[0]) | set(groups[1])):
        reached_a, censored_a = groups[0].get(step, (0, 0))
        reached_b, censored_b = groups[1].get(step, (0, 0))
        events, total = reached_a + reached_b, risk_a + risk_b
        if events:
            any_reached = True
            observed_a += reached_a
            expected_a += events * risk_a / total
            if total > 1:
                variance += risk_a * risk_b * events * (total - events) / (total * total * (total - 1))
        risk_a -= reached_a + censored_a
        risk_b -= reached_b + censored_b
    if not any_reached:
        return LogRank(statistic=None, z=None, observed_a=0, expected_a=0.0, p_value=None, paired=paired)
    z = (observed_a - expected_a) / math.sqrt(variance) if variance > 0 else 0.0
    chi_square_p = math.erfc(abs(z) / math.sqrt(2)) if variance > 0 else 1.0
    found = LogRank(
        statistic=z * z,
        z=z,
        observed_a=observed_a,
        expected_a=expected_a,
        p_value=None,
        chi_square_p=chi_square_p,
        paired=paired,
    )
    if min(len(a), len(b)) < 2:
        return found
    p_value, permutations, exact = _permutation_p([*a, *b], len(a), paired, seed)
    return found.model_copy(update={"p_value": p_value, "permutations": permutations, "exact": exact})


def logrank_z(times: np.ndarray, reached: np.ndarray, in_a: np.ndarray) -> np.ndarray:
    """The log-rank z of arm A for each row of `in_a` (permutations × episodes, 1 where the episode is A's), over the
    pooled episodes' times and reach: at every step someone reached it, observed minus expected reaching in A, over
    the hypergeometric standard deviation (0 where it is 0: then so is observed minus expected)."""
    import numpy as np

    steps = np.unique(times[reached])
    at_risk = (times[None, :] >= steps[:, None]).astype(float)  # steps × episodes
    reaching = ((times[None, :] == steps[:, None]) & reached[None, :]).astype(float)
    risk, events = at_risk.sum(axis=1), reaching.sum(axis=1)
    risk_a, events_a = in_a @ at_risk.T, in_a @ reaching.T  # permutations × steps
    excess = (events_a - events * risk_a / risk).sum(axis=1)
    scale = np.where(risk > 1, events * (risk - events) / (risk * risk * np.maximum(risk - 1, 1)), 0.0)
    variance = (risk_a * (risk - risk_a) * scale).sum(axis=1)
    positive = variance > 1e-12
    return np.where(positive, excess / np.sqrt(np.where(positive, variance, 1.0)), 0.0)


def _permutation_p(pooled: Sequence[TimeToEvent], size_a: int, paired: bool, seed: int) -> tuple[float, int, bool]:
    """Two-sided p of the log-rank |z| over the permutations the design allows: (p, how many, exact)."""
    import numpy as np

    times = np.array([item.steps for item in pooled], dtype=float)
    reached = np.array([item.reached for item in pooled], dtype=bool)
    observed_in_a = np.zeros((1, len(pooled)))
    observed_in_a[0, :size_a] = 1
    observed = abs(float(logrank_z(times, reached, observed_in_a)[0]))
    threshold = observed - 1e-9 * max(1.0, observed)
    count = 2**size_a if paired else math.comb(len(pooled), size_a)
    if count <= PERMUTATIONS_EXACT_MAX:
        assignments = _swaps(size_a) if paired else _splits(len(pooled), size_a)
        hits = int(np.count_nonzero(np.abs(logrank_z(times, reached, assignments)) >= threshold))
        return hits / count, count, True
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, PERMUTATIONS_RANDOM, PERMUTATION_CHUNK):
        rows = min(PERMUTATION_CHUNK, PERMUTATIONS_RANDOM - start)
        if paired:
            swapped = rng.integers(0, 2, size=(rows, size_a)).astype(float)
            assignments = np.concatenate((1 - swapped, swapped), axis=1)
        else:
            order = rng.random((rows, len(pooled))).argsort(axis=1)
            assignments = (order < size_a).astype(float)
        hits += int(np.count_nonzero(np.abs(logrank_z(times, reached, assignments)) >= threshold))
    return (hits + 1) / (PERMUTATIONS_RANDOM + 1), PERMUTATIONS_RANDOM, False


def _splits(total: int, size_a: int) -> np.ndarray:
    """Every choice of `size_a` of `total` episodes as arm A: C(total, size_a) rows of 0/1."""
    import itertools

    import numpy as np

    chosen = np.array(list(itertools.combinations(range(total), size_a)), dtype=int)
    rows = np.zeros((len(chosen), total))
    np.put_along_axis(rows, chosen, 1.0, axis=1)
    return rows


def _swaps(pairs: int) -> np.ndarray:
    """Every way to swap the arms within each of `pairs` seeds (A's episodes first, then B's, seed by seed): 2^pairs
    rows of 0/1 marking A."""
    import numpy as np

    swapped = ((np.arange(2**pairs)[:, None] >> np.arange(pairs)) & 1).astype(float)
    return np.concatenate((1 - swapped, swapped), axis=1)
