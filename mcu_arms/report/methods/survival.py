"""Steps to a milestone as time to an event: an episode that did not reach it is censored at the steps it ran.

Per arm, the Kaplan–Meier estimate of "not reached yet" by step, with a pointwise band (Greenwood's variance on the
log(−log) scale, which keeps it inside [0, 1]); the median steps-to-milestone with its interval (the steps where the
band's lower and upper curves cross 0.5; None: not reached); the probability of reaching it by the step cap. Between
two arms, the log-rank test. A "median of the episodes that reached it" would favour an arm that rarely reaches it.
Pure Python: `compare` is a light command.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import NamedTuple

from pydantic import BaseModel

from mcu_arms.report.stats import CONFIDENCE, Interval

KM_METHOD = f"Kaplan–Meier, censored at the steps run; {CONFIDENCE:.0%} band: Greenwood, log(−log) scale"
MEDIAN_METHOD = "median of the Kaplan–Meier curve; interval where the band crosses 0.5"
LOGRANK_METHOD = "two-sided log-rank test (chi-square, 1 degree of freedom)"


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
    p_value: float | None
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
    for point in points:
        if value_of(point) <= level + 1e-12:
            return point.step
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


def logrank(a: Sequence[TimeToEvent], b: Sequence[TimeToEvent]) -> LogRank:
    """Does arm A reach the milestone sooner or later than arm B? Observed vs expected reaching at every step."""
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
        return LogRank(statistic=None, z=None, observed_a=0, expected_a=0.0, p_value=None)
    if variance <= 0:
        return LogRank(statistic=0.0, z=0.0, observed_a=observed_a, expected_a=expected_a, p_value=1.0)
    z = (observed_a - expected_a) / math.sqrt(variance)
    return LogRank(
        statistic=z * z, z=z, observed_a=observed_a, expected_a=expected_a, p_value=math.erfc(abs(z) / math.sqrt(2))
    )
