"""Aggregates across tasks, as RL researchers read them (rliable: Agarwal et al., "Deep Reinforcement Learning at the
Edge of the Statistical Precipice", NeurIPS 2021), over (task × seed) scores normalised per task (score / max_score):

- the interquartile mean (IQM): the mean of the middle 50 % of all the normalised scores pooled (scipy's
  `trim_mean(x, 0.25)`: int(0.25 n) cut from each end);
- the probability of improvement P(arm > baseline): per task the Mann–Whitney statistic over seeds (the share of
  (arm seed, baseline seed) pairs where the arm scored higher, ties counting ½), averaged over the tasks;
- the performance profile: for thresholds τ in [0, 1], the share of the (task × seed) scores above τ.

Each with a stratified bootstrap 95 % percentile interval: seeds are resampled with replacement within each task
independently (a resample never moves a score to another task), from a generator seeded with a fixed number, so the
same scores always give the same intervals. With fewer than 2 seeds in every task there is nothing to resample: no
interval. Pure functions and models; numpy is imported inside the functions (`compare` is a light command).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from mcu_arms.stats.basics import CONFIDENCE, RESAMPLE_SEED, Interval

if TYPE_CHECKING:
    import numpy as np

AGGREGATE_RESAMPLES = 2_000
PROFILE_THRESHOLDS: tuple[float, ...] = tuple(round(step / 20, 2) for step in range(21))  # 0, 0.05, ..., 1
TRIM = 0.25  # the interquartile mean cuts a quarter from each end
# Below this many seeds per task the intervals covered 86–92 % where 95 % is stated (tests/bench/bench_across_tasks.py,
# docs/concepts/statistics.md): each line says so.
FEW_SEEDS = 8
BOOTSTRAP_METHOD = (
    f"stratified bootstrap 95% percentile interval ({AGGREGATE_RESAMPLES:,} resamples, seeded; seeds resampled with "
    "replacement within each task)"
)
IQM_METHOD = "interquartile mean of the (task × seed) scores normalised per task (score / max_score; trim_mean 0.25)"
IMPROVEMENT_METHOD = (
    "probability of improvement: per task the Mann–Whitney statistic over seeds (ties count 1/2), averaged over tasks"
)
PROFILE_METHOD = "performance profile: share of the (task × seed) normalised scores above each threshold"
METHOD = f"rliable's aggregates (Agarwal et al. 2021): {IQM_METHOD}; {IMPROVEMENT_METHOD}; {PROFILE_METHOD}; " + (
    f"intervals and bands: {BOOTSTRAP_METHOD}"
)

TaskSeedScores = Mapping[str, Mapping[int, float]]  # task -> seed -> normalised score


class PerformanceProfile(BaseModel):
    """The share of scores above each threshold; the band is None when no task has 2 seeds to resample."""

    thresholds: list[float]
    share: list[float]
    low: list[float] | None = None
    high: list[float] | None = None
    method: str = f"{PROFILE_METHOD}; band: {BOOTSTRAP_METHOD}"


class ArmAggregate(BaseModel):
    """One arm's aggregates over the tasks compared."""

    arm: str
    tasks: int
    seeds: list[int]  # per task, in the order of AcrossTasks.tasks
    scores: int  # (task × seed) normalised scores pooled
    normalised: dict[str, dict[int, float]]  # task -> seed -> score / max_score
    iqm: float
    iqm_interval: Interval | None  # None: fewer than 2 seeds in every task
    profile: PerformanceProfile
    method: str = f"{IQM_METHOD}; interval: {BOOTSTRAP_METHOD}"
    text: str


class Improvement(BaseModel):
    """P(arm > baseline) over the tasks both were scored on."""

    arm: str
    baseline: str
    probability: float
    interval: Interval | None
    tasks: int
    method: str = f"{IMPROVEMENT_METHOD}; interval: {BOOTSTRAP_METHOD}"
    text: str


class AcrossTasks(BaseModel):
    """The across-tasks section of a comparison: present when the arms were compared on 2 tasks or more."""

    tasks: list[str]  # the tasks every arm compared was scored on
    arms: list[ArmAggregate] = Field(default_factory=list)
    improvement: list[Improvement] = Field(default_factory=list)  # each arm against the baseline
    excluded: list[str] = Field(default_factory=list)  # tasks and episodes left out, each with why
    unavailable: str | None = None  # why no aggregate could be computed (then `arms` is empty)
    method: str = METHOD


def interquartile_mean(values: Sequence[float]) -> float:
    """scipy.stats.trim_mean(values, 0.25): the mean after cutting int(0.25 n) of the sorted values from each end."""
    ordered = sorted(values)
    cut = int(TRIM * len(ordered))
    middle = ordered[cut : len(ordered) - cut]
    return sum(middle) / len(middle)


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """The interquartile mean of each row."""
    import numpy as np

    cut = int(TRIM * samples.shape[1])
    return np.sort(samples, axis=1)[:, cut : samples.shape[1] - cut].mean(axis=1)


def stratified_resample(
    tasks: Sequence[Sequence[float]], *, resamples: int = AGGREGATE_RESAMPLES, seed: int = RESAMPLE_SEED
) -> np.ndarray:
    """A resamples × (all scores) matrix: in each row, task t's columns (in order, as many as it has seeds) are drawn
    with replacement from task t's scores only."""
    import numpy as np

    rng = np.random.default_rng(seed)
    blocks = []
    for scores in tasks:
        values = np.asarray(scores, dtype=float)
        blocks.append(values[rng.integers(0, len(values), size=(resamples, len(values)))])
    return np.concatenate(blocks, axis=1)


def _interval(samples: np.ndarray) -> tuple[list[float], list[float]]:
    """The central CONFIDENCE share of each column of `samples` (or of a 1-d array)."""
    import numpy as np

    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(samples, [tail, 1 - tail], axis=0)
    return np.atleast_1d(low).tolist(), np.atleast_1d(high).tolist()


def performance_profile(values: Sequence[float], thresholds: Sequence[float] = PROFILE_THRESHOLDS) -> list[float]:
    """The share of `values` strictly above each threshold."""
    return [sum(1 for value in values if value > tau) / len(values) for tau in thresholds]


def mann_whitney_share(a: Sequence[float], b: Sequence[float]) -> float:
    """P(A > B) estimated over every (a, b) pair, ties counting ½: the Mann–Whitney U of A over len(a) × len(b)."""
    wins = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    return wins / (len(a) * len(b))


def probability_of_improvement(arm: Mapping[str, Sequence[float]], baseline: Mapping[str, Sequence[float]]) -> float:
    """The per-task Mann–Whitney share P(arm > baseline), averaged over the tasks of `arm` (each also in `baseline`)."""
    return sum(mann_whitney_share(arm[task], baseline[task]) for task in arm) / len(arm)


def _improvement_samples(
    arm: Sequence[Sequence[float]], baseline: Sequence[Sequence[float]], resamples: int, seed: int
) -> np.ndarray:
    """The probability of improvement in each stratified resample: within each task, each arm's seeds drawn on their
    own."""
    import numpy as np

    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for scores_a, scores_b in zip(arm, baseline, strict=True):
        a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
        drawn_a = a[rng.integers(0, len(a), size=(resamples, len(a)))][:, :, None]
        drawn_b = b[rng.integers(0, len(b), size=(resamples, len(b)))][:, None, :]
        total += ((drawn_a > drawn_b) + 0.5 * (drawn_a == drawn_b)).mean(axis=(1, 2))
    return total / len(arm)


def _arm_aggregate(name: str, tasks: list[str], normalised: TaskSeedScores, resamples: int) -> ArmAggregate:
    per_task = [[normalised[task][seed] for seed in sorted(normalised[task])] for task in tasks]
    pooled = [value for scores in per_task for value in scores]
    seeds = [len(scores) for scores in per_task]
    iqm = interquartile_mean(pooled)
    shares = performance_profile(pooled)
    profile = PerformanceProfile(thresholds=list(PROFILE_THRESHOLDS), share=shares)
    interval = None
    if max(seeds) >= 2:
        import numpy as np

        samples = stratified_resample(per_task, resamples=resamples)
        low, high = _interval(_iqm_rows(samples))
        interval = Interval(low=low[0], high=high[0])
        above = (samples[:, :, None] > np.asarray(PROFILE_THRESHOLDS)[None, None, :]).mean(axis=1)
        profile.low, profile.high = _interval(above)
    if len(set(seeds)) == 1:
        shape = f"{len(tasks)} tasks × {seeds[0]} seeds"
    else:
        shape = f"{len(tasks)} tasks, {len(pooled)} (task × seed) scores ({min(seeds)}–{max(seeds)} seeds per task)"
    if interval is None:
        text = f"{name}: IQM {iqm:.2f} over {shape} (one seed per task: no interval)"
    else:
        text = f"{name}: IQM {iqm:.2f} {interval.text()} over {shape}" + (
            f" ({max(seeds)} seeds per task: a bootstrap this small may cover less than 95%)"
            if max(seeds) < FEW_SEEDS
            else ""
        )
    return ArmAggregate(
        arm=name,
        tasks=len(tasks),
        seeds=seeds,
        scores=len(pooled),
        normalised={task: dict(normalised[task]) for task in tasks},
        iqm=iqm,
        iqm_interval=interval,
        profile=profile,
        text=text,
    )


def _improvement(
    name: str, baseline: str, tasks: list[str], arm: TaskSeedScores, base: TaskSeedScores, resamples: int
) -> Improvement:
    scores_a = [[arm[task][seed] for seed in sorted(arm[task])] for task in tasks]
    scores_b = [[base[task][seed] for seed in sorted(base[task])] for task in tasks]
    probability = probability_of_improvement(
        dict(zip(tasks, scores_a, strict=True)), dict(zip(tasks, scores_b, strict=True))
    )
    most = max(len(s) for s in scores_a + scores_b)
    interval = None
    if most >= 2:
        low, high = _interval(_improvement_samples(scores_a, scores_b, resamples, RESAMPLE_SEED))
        interval = Interval(low=low[0], high=high[0])
    seeds = f"{max(len(s) for s in scores_a)} + {max(len(s) for s in scores_b)} seeds"
    shown = f" {interval.text()}" if interval is not None else " (one seed per task: no interval)"
    small = " (a bootstrap this small may cover less than 95%)" if interval is not None and most < FEW_SEEDS else ""
    return Improvement(
        arm=name,
        baseline=baseline,
        probability=probability,
        interval=interval,
        tasks=len(tasks),
        text=f"P({name} > {baseline}) = {probability:.2f}{shown} over {len(tasks)} tasks, {seeds} per task{small}",
    )


def across_tasks(
    arms: Mapping[str, TaskSeedScores],
    baseline: str,
    *,
    excluded: Sequence[str] = (),
    resamples: int = AGGREGATE_RESAMPLES,
) -> AcrossTasks:
    """The aggregates of each arm (arm -> task -> seed -> normalised score) over the tasks every arm was scored on,
    and each arm's probability of improvement over `baseline` (when it is among `arms`). Tasks some arm lacks are
    left out, named in `excluded`; fewer than 2 common tasks leave the section `unavailable`, saying why."""
    named = [task for scores in arms.values() for task in scores]
    every = list(dict.fromkeys(named))
    common = [task for task in every if all(scores.get(task) for scores in arms.values())]
    left_out = list(excluded)
    for task in every:
        if task not in common:
            lacking = ", ".join(name for name, scores in arms.items() if not scores.get(task))
            left_out.append(f"task {task}: not scored in {lacking}, left out of every aggregate")
    if len(common) < 2:
        why = f"{len(common)} task{'s' if len(common) != 1 else ''} scored in every arm; aggregates need 2 or more"
        return AcrossTasks(tasks=common, excluded=left_out, unavailable=why)
    aggregates = [_arm_aggregate(name, common, scores, resamples) for name, scores in arms.items()]
    improvement = [
        _improvement(name, baseline, common, scores, arms[baseline], resamples)
        for name, scores in arms.items()
        if name != baseline and baseline in arms
    ]
    return AcrossTasks(tasks=common, arms=aggregates, improvement=improvement, excluded=left_out)
