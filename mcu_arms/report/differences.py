"""Between each arm and the baseline: every difference with its design (paired by seed where the seeds are the same
worlds, over the seeds both arms completed), method, estimate, interval, p (Holm-adjusted within its family) and
verdict in words — what `compare` says about seed noise. The numbers come from stats/.
"""

from __future__ import annotations

from typing import cast

from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.report.analysis_model import ArmAnalysis, ArmDifference, DifferenceResult, DifferenceVerdict
from mcu_arms.stats.basics import (
    ALPHA,
)
from mcu_arms.stats.comparison import MetricComparison, compare_metric
from mcu_arms.stats.design import ExcludedSeed, Pairing, pairing
from mcu_arms.stats.multiplicity import HOLM_METHOD, holm
from mcu_arms.stats.sequential import (
    PRIMARY_METRICS,
    PrimaryMetric,
    SequentialTest,
    primary_value,
    sequential_compare,
)
from mcu_arms.stats.survival import (
    KM_METHOD,
    LOGRANK_METHOD,
    MEDIAN_METHOD,
    TimeToEvent,
    episodes,
    kaplan_meier,
    logrank,
)


def _design_text(line: DifferenceResult) -> str:
    return (
        f"{line.design}, n = {line.n_a}" if line.design == "paired" else f"{line.design}, n = {line.n_a} + {line.n_b}"
    )


def _verdict_of(line: DifferenceResult) -> DifferenceVerdict:
    """Read on the adjusted p (raw when the test is alone); an interval, where there is one, must exclude 0. "no
    difference" only when there is none in the data (`identical`), never for a zero mean with a wide interval."""
    p = line.p_adjusted if line.p_adjusted is not None else line.p
    if line.n_a == 0 or line.n_b == 0:
        return "no runs"
    if line.sequential is not None:
        return "distinguishable" if line.sequential.rejected else "not resolved"
    if line.identical:
        return "no difference"
    if p is None:
        return "too few episodes"
    excludes_zero = line.interval is None or line.interval.low > 0 or line.interval.high < 0
    if p < ALPHA and excludes_zero:
        return "distinguishable"
    return "not resolved"


def _worded(line: DifferenceResult) -> str:
    """The one sentence every view shows for a difference: estimate, interval, test, p (adjusted), verdict, and the
    seeds left out of a pairing."""
    if line.medians is not None:
        reach = line.reach or ["?", "?"]
        shown = ["not reached" if median is None else f"{median:g}" for median in line.medians]
        head = (
            f"{line.metric} (Kaplan–Meier median): {shown[0]} for {line.arm} (reached {reach[0]}) vs {shown[1]} for "
            f"{line.baseline} (reached {reach[1]})"
        )
    elif line.estimate is None:
        head = f"{line.metric}: {line.arm} − {line.baseline}: no estimate"
    else:
        head = f"{line.metric}: {line.arm} − {line.baseline} = {line.estimate:+.2f}"
    if line.interval is not None:
        head += f" {line.interval.text()}"
    design = _design_text(line)
    why = f"; {line.excluded}" if line.excluded else ""
    if line.design == "unpaired":
        why += f"; unpaired: {line.design_reason}"
    if line.verdict == "no difference":
        return f"{head}; no difference: every episode the same ({design}){why}"
    if line.p is None:
        return f"{head}; {design}: no interval or test can be given (run more seeds: `--seeds 0-5`){why}"
    adjusted = f", Holm-adjusted p = {line.p_adjusted:.3g}" if line.p_adjusted is not None else ""
    test = "log-rank, permutation" if line.medians is not None else line.design
    head += f" ({test}: p = {line.p:.3g}{adjusted})"
    effect = f"; {line.pairing_effect.text()}" if line.pairing_effect is not None else ""
    if line.sequential is not None:
        return f"{_sequential_text(line, line.sequential)}; fixed-n figures, secondary: {head}{why}{effect}"
    if line.verdict == "distinguishable":
        return f"{head}; distinguishable from seed noise ({design}){why}{effect}"
    tail = ""
    if line.seeds_needed is not None:
        unit = "paired seeds" if line.design == "paired" else "seeds per arm"
        tail = f"; about {line.seeds_needed} {unit} would resolve a difference of this size"
    return f"{head}; not resolved ({design}){tail}{why}{effect}"


def _sequential_text(line: DifferenceResult, test: SequentialTest) -> str:
    """The verdict of a sequential experiment: its own test's, with the alpha its looks spent."""
    last = test.looks[-1]
    looks = ", ".join(str(look.n) for look in test.looks)
    spent = f"alpha spent {test.alpha_spent:.4f} of {test.alpha:.4g} (this variant's share)"
    if test.rejected:
        return (
            f"{line.metric}: {line.arm} − {line.baseline}: distinguishable from seed noise by the sequential test "
            f"(run --until-resolved) at look {last.look}, {last.n} paired seeds; {spent}"
        )
    return (
        f"{line.metric}: {line.arm} − {line.baseline}: not resolved by the sequential test (run --until-resolved; "
        f"looks at {looks} of at most {test.max_seeds} seeds); {spent}"
    )


PRIMARY_NAMES: dict[PrimaryMetric, str] = {
    "score": "score",
    "sim_score": "sim_score",
    "milestones": "milestones reached",
}


def values_by_seed(arm: ArmAnalysis, primary: PrimaryMetric) -> dict[int, float]:
    """seed -> the score, sim score or milestones reached of each episode used (as `run --until-resolved` reads its
    primary metric); an episode without the value is left out."""
    values = {}
    for each in arm.per_episode:
        value = primary_value(
            primary, score=each.score, sim_score=each.sim_score, milestones_reached=each.milestones_reached
        )
        if value is not None:
            values[each.seed] = value
    return values


def _sequential_test(arm: ArmAnalysis, base: ArmAnalysis, design: Pairing) -> SequentialTest | None:
    """Both arms' episodes were run with `--until-resolved`, paired: the group-sequential test over them on the
    primary metric the run used, looked at as run (None otherwise: the fixed-n figures are the verdict)."""
    plan = base.sequential
    if plan is None or arm.sequential is None or design.design != "paired" or plan.primary not in PRIMARY_METRICS:
        return None
    look_of_seed = {ref.seed: ref.look for ref in base.used if ref.look is not None and ref.seed in design.seeds}
    if not look_of_seed:
        return None
    primary = cast(PrimaryMetric, plan.primary)
    recorded = SequentialLook(
        look=max(look_of_seed.values()),
        primary=primary,
        max_seeds=plan.max_seeds,
        batch=plan.looks[0],
        alpha=plan.alpha,
        comparisons=plan.comparisons,
    )
    return sequential_compare(values_by_seed(arm, primary), values_by_seed(base, primary), look_of_seed, recorded)


def _metric_line(
    primary: PrimaryMetric, arm: ArmAnalysis, base: ArmAnalysis, design: Pairing, variants: int
) -> DifferenceResult:
    """The score, sim score or milestones reached, arm against baseline, paired by seed when the design allows (else
    two independent samples, saying why)."""
    metric = PRIMARY_NAMES[primary]
    mine, theirs = values_by_seed(arm, primary), values_by_seed(base, primary)
    found: MetricComparison = compare_metric(
        metric, mine, theirs, design, name_a=arm.arm, name_b=base.arm, variants=variants
    )
    if found.paired is not None:
        identical = found.paired.n >= 2 and all(value == 0 for value in found.paired.differences)
    else:
        identical = min(len(mine), len(theirs)) >= 2 and len({*mine.values(), *theirs.values()}) == 1
    return DifferenceResult(
        metric=metric,
        arm=arm.arm,
        baseline=base.arm,
        method=found.method,
        design=found.design,
        design_reason=found.design_reason,
        n_a=found.n_a,
        n_b=found.n_b,
        estimate=found.estimate,
        interval=found.ci,
        p=found.p_value,
        verdict="too few episodes",
        seeds_needed=found.seeds_needed,
        pairing_effect=found.paired.effect if found.paired else None,
        identical=identical,
        excluded=design.excluded_text() if design.design == "paired" else "",
        text="",
    )


def _score_and_primary(
    arm: ArmAnalysis, base: ArmAnalysis, design: Pairing, variants: int
) -> tuple[DifferenceResult, DifferenceResult | None]:
    """The score line; and, for episodes run `--until-resolved` on another metric, that metric's line. The line of
    the metric the run stopped by carries the sequential test, which its verdict reads."""
    score = _metric_line("score", arm, base, design, variants)
    sequential = _sequential_test(arm, base, design)
    if sequential is None or base.sequential is None or base.sequential.primary == "score":
        score.sequential = sequential
        return score, None
    line = _metric_line(cast(PrimaryMetric, base.sequential.primary), arm, base, design, variants)
    line.sequential = sequential
    return score, line


def _milestone_difference(key: str, arm: ArmAnalysis, base: ArmAnalysis, design: Pairing) -> DifferenceResult | None:
    """Steps to a milestone as time to an event (censored at the steps run): the arms' Kaplan–Meier medians, reach
    k/n, and the log-rank test by permutation (within seeds when the design pairs them). None when neither arm
    reached it."""
    paired = design.design == "paired"

    def times(of: ArmAnalysis) -> list[TimeToEvent]:
        kept = [each for each in of.per_episode if not paired or each.seed in design.seeds]
        return episodes([each.steps.get(key) for each in kept], [each.steps_run or 0 for each in kept])

    mine, theirs = times(arm), times(base)  # per_episode is in seed order: paired, mine[i] and theirs[i] share one
    test = logrank(mine, theirs, paired=paired)
    if test.statistic is None:
        return None
    medians = [kaplan_meier(data).median for data in (mine, theirs)]
    first, second = medians
    estimate = first - second if first is not None and second is not None else None
    identical = min(len(mine), len(theirs)) >= 2 and (mine == theirs if paired else len({*mine, *theirs}) == 1)
    return DifferenceResult(
        metric=f"{key.split('/', 1)[1]} steps",
        arm=arm.arm,
        baseline=base.arm,
        method=f"{KM_METHOD}; {MEDIAN_METHOD}; {LOGRANK_METHOD}",
        design="paired" if paired else "unpaired",
        design_reason=design.reason,
        n_a=len(mine),
        n_b=len(theirs),
        estimate=estimate,
        interval=None,
        p=test.p_value,
        verdict="too few episodes",
        seeds_needed=None,
        medians=medians,
        reach=[f"{sum(item.reached for item in data)}/{len(data)}" for data in (mine, theirs)],
        identical=identical,
        excluded=design.excluded_text() if paired else "",
        text="",
    )


def _with_reasons(design: Pairing, arm: ArmAnalysis, base: ArmAnalysis) -> Pairing:
    """The pairing with each seed left out named: which arm lacks a finished episode of it, and why (its latest
    episode of that seed, excluded with a reason, or "not run")."""
    excluded = []
    for seed in design.unpartnered:
        lacking = base if seed in arm.seeds else arm
        episode = next((each for each in reversed(lacking.excluded) if each.seed == seed), None)
        if episode is None:
            excluded.append(ExcludedSeed(seed=seed, arm=lacking.arm, cause="not run", reason="not run"))
            continue
        reason = f"episode {episode.episode} {episode.reason}: {episode.detail}"
        excluded.append(ExcludedSeed(seed=seed, arm=lacking.arm, cause=episode.reason, reason=reason))
    return design.model_copy(update={"excluded": excluded})


def compare_with_baseline(arms: list[ArmAnalysis], baseline: int) -> tuple[list[ArmDifference], str]:
    """Each arm with finished episodes against the baseline: the score (paired when the design allows) and the steps
    to every milestone either reached (time to event); then Holm over all of them. Returns the family in words."""
    base = arms[baseline]
    if base.n == 0:
        return [], "no test was made"
    differences = []
    variants = sum(1 for arm in arms if arm is not base and arm.n > 0)
    for arm in arms:
        if arm is base or arm.n == 0:
            continue
        design = _with_reasons(
            pairing(
                arm.settings.simulator,
                arm.settings.reset_mode,
                arm.seeds,
                base.settings.simulator,
                base.settings.reset_mode,
                base.seeds,
            ),
            arm,
            base,
        )
        keys = [
            key
            for key, stats in base.milestones.items()
            if stats.available and key in arm.milestones and (stats.reached or arm.milestones[key].reached)
        ]
        milestone_steps = [line for key in keys if (line := _milestone_difference(key, arm, base, design)) is not None]
        score, primary = _score_and_primary(arm, base, design, variants)
        differences.append(
            ArmDifference(
                arm=arm.arm,
                baseline=base.arm,
                pairing=design,
                primary=primary,
                score=score,
                milestone_steps=milestone_steps,
            )
        )
    families = {
        f"the {{count}} score test(s) (the primary metric, one per arm against {base.arm})": [
            difference.score for difference in differences
        ],
        "the {count} steps-to-milestone test(s)": [
            line for difference in differences for line in difference.milestone_steps
        ],
    }
    stated = []
    for name, members in families.items():
        tested = [(str(index), line.p) for index, line in enumerate(members)]
        count = sum(p is not None for _, p in tested)
        if count == 0:
            continue
        stated.append(name.format(count=count))
        adjusted = holm(tested, family=stated[-1])
        for index, line in enumerate(members):
            test = adjusted.adjusted(str(index))
            line.p_adjusted = test.adjusted_p if test is not None and count > 1 else None
    family = (
        f"{HOLM_METHOD} within each family: {'; '.join(stated)}; verdicts read the adjusted p (a test alone "
        "in its family is not adjusted)"
        if stated
        else "no test was made"
    )
    lines = [line for difference in differences for line in difference.lines()]
    for line in lines:
        line.verdict = _verdict_of(line)
        line.text = _worded(line)
    return differences, family
