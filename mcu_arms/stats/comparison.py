"""One metric, or one milestone, compared between two arms with the design the arms allow, every number named by the
method that produced it; and the family of a compare's tests adjusted together (Holm)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from mcu_arms.stats.basics import ALPHA, Difference, Interval, compare_means
from mcu_arms.stats.basics import METHOD as UNPAIRED_METHOD
from mcu_arms.stats.design import Design, Pairing
from mcu_arms.stats.multiplicity import Holm, holm
from mcu_arms.stats.paired import PAIRED_VERDICT_RULE, T_INTERVAL_METHOD, PairedDifference, compare_paired
from mcu_arms.stats.power import POWER_METHOD
from mcu_arms.stats.survival import KaplanMeier, LogRank, TimeToEvent, episodes, kaplan_meier, logrank


class MetricComparison(BaseModel):
    """A − B for one metric under the design used; `paired` or `unpaired` holds the details of the one that ran."""

    metric: str
    design: Design
    design_reason: str
    n_a: int
    n_b: int
    estimate: float | None
    ci: Interval | None
    p_value: float | None
    adjusted_p: float | None = None  # Holm over the compare's family; the verdict reads it when set
    distinguishable: bool
    seeds_needed: int | None  # paired seeds (paired) or seeds per arm (unpaired)
    method: str  # the interval's and the test's, in words
    text: str
    paired: PairedDifference | None = None
    unpaired: Difference | None = None


def compare_metric(
    metric: str,
    a: Mapping[int, float],
    b: Mapping[int, float],
    pairing: Pairing,
    *,
    name_a: str,
    name_b: str,
    variants: int = 1,
) -> MetricComparison:
    """Paired by seed when `pairing` says so (over its seeds), else today's two-sample test (stats/basics.py), saying
    why; `variants`: arms compared with the same baseline (the seeds needed are for a Holm family that size)."""
    if pairing.design == "paired":
        mine = {seed: a[seed] for seed in pairing.seeds}
        theirs = {seed: b[seed] for seed in pairing.seeds}
        result = compare_paired(metric, mine, theirs, name_a=name_a, name_b=name_b, variants=variants)
        test_method = result.test.method if result.test else "no test below 2 pairs"
        method = f"{T_INTERVAL_METHOD}; {test_method}; {PAIRED_VERDICT_RULE}; {POWER_METHOD}"
        return MetricComparison(
            metric=metric,
            design="paired",
            design_reason=pairing.reason,
            n_a=result.n,
            n_b=result.n,
            estimate=result.estimate,
            ci=result.ci,
            p_value=result.p_value,
            distinguishable=result.distinguishable,
            seeds_needed=result.seeds_needed,
            method=method,
            text=result.text,
            paired=result,
        )
    result_unpaired = compare_means(metric, list(a.values()), list(b.values()), name_a=name_a, name_b=name_b)
    return MetricComparison(
        metric=metric,
        design="unpaired",
        design_reason=pairing.reason,
        n_a=result_unpaired.n_a,
        n_b=result_unpaired.n_b,
        estimate=result_unpaired.estimate,
        ci=result_unpaired.ci,
        p_value=result_unpaired.p_value,
        distinguishable=result_unpaired.distinguishable,
        seeds_needed=result_unpaired.seeds_needed,
        method=UNPAIRED_METHOD,
        text=f"{result_unpaired.text} (unpaired: {pairing.reason})",
        unpaired=result_unpaired,
    )


def adjust_family(
    comparisons: Sequence[MetricComparison], *, family: str, alpha: float = ALPHA
) -> tuple[Holm, list[MetricComparison]]:
    """Holm over the comparisons' p-values; each comparison's verdict then reads its adjusted p (its interval must
    still exclude 0). The names in the Holm result are the comparisons' positions joined with their metric."""
    names = [f"{index}:{comparison.metric}" for index, comparison in enumerate(comparisons)]
    result = holm(
        [(name, comparison.p_value) for name, comparison in zip(names, comparisons, strict=True)],
        family=family,
        alpha=alpha,
    )
    adjusted = []
    for name, comparison in zip(names, comparisons, strict=True):
        test = result.adjusted(name)
        if test is None:
            adjusted.append(comparison)
            continue
        excludes_zero = comparison.ci is not None and (comparison.ci.low > 0 or comparison.ci.high < 0)
        adjusted.append(
            comparison.model_copy(
                update={
                    "adjusted_p": test.adjusted_p,
                    "distinguishable": test.rejected and excludes_zero,
                }
            )
        )
    return result, adjusted


class MilestoneComparison(BaseModel):
    """Steps to one milestone in two arms, as time to an event (censored at the steps run)."""

    task: str
    identity: str
    arm_a: KaplanMeier
    arm_b: KaplanMeier
    logrank: LogRank


def compare_milestone(
    task: str,
    identity: str,
    a: Sequence[tuple[int | None, int]],
    b: Sequence[tuple[int | None, int]],
) -> MilestoneComparison:
    """a and b: per episode, (the step the milestone was reached at, or None; the steps the episode ran)."""
    times_a: list[TimeToEvent] = episodes([step for step, _ in a], [run for _, run in a])
    times_b: list[TimeToEvent] = episodes([step for step, _ in b], [run for _, run in b])
    return MilestoneComparison(
        task=task,
        identity=identity,
        arm_a=kaplan_meier(times_a),
        arm_b=kaplan_meier(times_b),
        logrank=logrank(times_a, times_b),
    )
