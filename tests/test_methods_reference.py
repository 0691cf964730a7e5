"""stats/ against reference implementations (scipy.stats, lifelines) on fixed fixtures, and by hand where
the edge is the point (censoring: none, all, ties; Holm)."""

from __future__ import annotations

import math

import pytest

from mcu_arms.stats.basics import difference_interval, mean_interval, summarise
from mcu_arms.stats.design import pairing
from mcu_arms.stats.multiplicity import holm
from mcu_arms.stats.paired import (
    SIGN_FLIP_RESAMPLES,
    compare_paired,
    pairing_effect,
    sign_flip_test,
)
from mcu_arms.stats.power import seeds_needed_paired
from mcu_arms.stats.survival import TimeToEvent, episodes, kaplan_meier, logrank

np = pytest.importorskip("numpy")
stats = pytest.importorskip("scipy.stats", reason="scipy is in the test extra")
lifelines = pytest.importorskip("lifelines", reason="lifelines is in the test extra")
from lifelines.statistics import logrank_test  # noqa: E402 - after the importorskip above
from lifelines.utils import median_survival_times  # noqa: E402 - after the importorskip above

A = [12.0, 30.0, 7.5, 44.0, 18.0, 25.0, 9.0, 31.0]
B = [10.0, 21.0, 9.0, 30.0, 11.0, 27.0, 2.0, 20.0]
STEPS_A = [(120, 300), (None, 300), (80, 300), (120, 300), (None, 100), (200, 300), (None, 300), (95, 300)]
STEPS_B = [(150, 300), (None, 300), (None, 300), (210, 300), (None, 300), (290, 300), (120, 300), (None, 200)]


def _paired_reference(a, b, n_resamples):
    return stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
    )


@pytest.mark.parametrize("shift", [0.0, 3.0, -6.0])
def test_the_exact_sign_flip_p_is_scipys_paired_permutation_test(shift: float) -> None:
    a = [x + shift for x in A]
    ours = sign_flip_test([x - y for x, y in zip(a, B, strict=True)])
    reference = _paired_reference(np.array(a), np.array(B), np.inf)
    assert ours.exact and ours.resamples == 2 ** len(A)
    assert ours.p_value == pytest.approx(reference.pvalue, abs=1e-9)


def test_zero_differences_and_ties_in_the_sign_flip_test() -> None:
    a, b = [3.0, 3.0, 5.0, 1.0, 4.0], [3.0, 1.0, 3.0, 3.0, 2.0]  # one zero, equal magnitudes of both signs
    ours = sign_flip_test([x - y for x, y in zip(a, b, strict=True)])
    assert ours.p_value == pytest.approx(_paired_reference(np.array(a), np.array(b), np.inf).pvalue, abs=1e-9)
    assert sign_flip_test([0.0, 0.0, 0.0]).p_value == 1.0


def test_the_monte_carlo_sign_flip_p_is_within_its_error_of_the_exact_one() -> None:
    rng = np.random.default_rng(7)
    differences = rng.normal(0.45, 1.0, size=24)
    ours = sign_flip_test(differences)
    assert not ours.exact and ours.resamples == SIGN_FLIP_RESAMPLES
    reference = _paired_reference(differences, np.zeros(24), 200_000).pvalue
    error = math.sqrt(reference * (1 - reference) * (1 / SIGN_FLIP_RESAMPLES + 1 / 200_000))
    assert abs(ours.p_value - reference) < 4 * error + 1 / SIGN_FLIP_RESAMPLES
    assert sign_flip_test(differences).p_value == ours.p_value  # seeded


@pytest.mark.parametrize("n", [2, 3, 6, 8])
def test_the_mean_interval_is_scipys(n: int) -> None:
    differences = [x - y for x, y in zip(A[:n], B[:n], strict=True)]
    ours = mean_interval(differences)
    low, high = stats.t.interval(0.95, n - 1, loc=np.mean(differences), scale=stats.sem(differences))
    assert ours is not None and (ours.low, ours.high) == pytest.approx((low, high), abs=1e-9)
    assert mean_interval([3.0]) is None and mean_interval([2.0, 2.0]) == mean_interval([2.0, 2.0, 2.0])
    assert summarise(A[:n]).ci == mean_interval(A[:n]), "an arm's mean carries the same interval"


@pytest.mark.parametrize(("n_a", "n_b"), [(2, 2), (3, 5), (6, 4), (8, 8)])
def test_the_unpaired_interval_is_scipys_welch_with_its_degrees_rounded_down(n_a: int, n_b: int) -> None:
    """Was: a percentile bootstrap of each arm, which covers 75 % at 3 + 3 (tests/bench/bench_small_n_stats.py)."""
    a, b = A[:n_a], [value * 3 for value in B[:n_b]]
    ours = difference_interval(a, b)
    share_a, share_b = np.var(a, ddof=1) / n_a, np.var(b, ddof=1) / n_b
    degrees = (share_a + share_b) ** 2 / (share_a**2 / (n_a - 1) + share_b**2 / (n_b - 1))
    welch = stats.ttest_ind(a, b, equal_var=False)
    assert welch.df == pytest.approx(degrees)
    low, high = stats.t.interval(0.95, np.floor(degrees), loc=np.mean(a) - np.mean(b), scale=np.sqrt(share_a + share_b))
    assert ours is not None and (ours.low, ours.high) == pytest.approx((low, high), abs=1e-9)
    exact = welch.confidence_interval(0.95)
    assert ours.low <= exact.low and ours.high >= exact.high, "rounding the degrees down only widens it"


def test_the_pairing_effect_is_numpys_correlation_and_variances() -> None:
    effect = pairing_effect(A, B)
    assert effect.correlation == pytest.approx(np.corrcoef(A, B)[0, 1], abs=1e-12)
    assert effect.variance_paired == pytest.approx(np.var(np.subtract(A, B), ddof=1), abs=1e-9)
    assert effect.variance_unpaired == pytest.approx(np.var(A, ddof=1) + np.var(B, ddof=1), abs=1e-9)
    assert effect.variance_paired < effect.variance_unpaired  # correlated arms: pairing helps


def test_identical_arms_are_no_difference_with_a_zero_width_interval() -> None:
    same = {seed: value for seed, value in enumerate(A)}
    result = compare_paired("score", same, dict(same), name_a="a", name_b="b")
    assert (result.estimate, result.ci.low, result.ci.high, result.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert not result.distinguishable and result.seeds_needed is None
    assert "no difference: every paired difference is 0 (paired, n = 8)" in result.text


def test_six_same_sign_pairs_resolve_and_five_cannot() -> None:
    six = compare_paired(
        "score",
        dict(enumerate([0, 0, 0, 0, 0, 0])),
        dict(enumerate([53, 40, 60, 55, 47, 70])),
        name_a="demo_random",
        name_b="demo",
    )
    assert six.p_value == pytest.approx(2 / 64) and six.distinguishable
    assert "distinguishable from seed noise (paired, n = 6)" in six.text
    five = compare_paired(
        "score", dict(enumerate([0] * 5)), dict(enumerate([53, 40, 60, 55, 47])), name_a="a", name_b="b"
    )
    assert five.p_value == pytest.approx(2 / 32) and not five.distinguishable and five.seeds_needed == 6
    assert "not resolved (paired, n = 5)" in five.text
    assert seeds_needed_paired([1.0, 1.2, 0.9]) == 6 and seeds_needed_paired([0.0, 0.0]) is None
    assert seeds_needed_paired([1.0, -1.0, 1.2, -0.8]) is None  # more than MAX_PLANNED_SEEDS


def test_pairing_needs_the_same_seeds_on_a_seeded_world() -> None:
    assert pairing("embedded", None, [0, 1, 2], "embedded", None, [2, 1, 0]).design == "paired"
    assert pairing("minestudio", "hard", [0, 1], "minestudio", "hard", [0, 1]).design == "paired"
    assert pairing("minestudio", None, [0, 1], "minestudio", "hard", [0, 1]).design == "paired"  # the default reset
    fast = pairing("minestudio", "seeded_fast", [0, 1], "minestudio", "seeded_fast", [0, 1])
    assert fast.design == "unpaired" and "seeded_fast" in fast.reason
    assert "Mineflayer" in pairing("mineflayer", None, [0], "mineflayer", None, [0]).reason
    assert "different seeds" in pairing("embedded", None, [0, 1], "embedded", None, [0, 2]).reason


def _lifelines_km(data):
    fitter = lifelines.KaplanMeierFitter(alpha=0.05)
    fitter.fit([item.steps for item in data], [item.reached for item in data])
    return fitter


@pytest.mark.parametrize("fixture", [STEPS_A, STEPS_B], ids=["a", "b"])
def test_kaplan_meier_curve_band_and_median_are_lifelines(fixture) -> None:
    """(The fixtures avoid a curve at exactly 0.5: lifelines multiplies in log space and may land either side.)"""
    data = episodes([step for step, _ in fixture], [run for _, run in fixture])
    ours, fitter = kaplan_meier(data), _lifelines_km(data)
    for point in ours.points:
        assert point.not_reached == pytest.approx(fitter.survival_function_.loc[point.step].iloc[0], abs=1e-9)
        band = fitter.confidence_interval_.loc[point.step]
        if 0 < point.not_reached < 1:
            assert (point.band.low, point.band.high) == pytest.approx((band.iloc[0], band.iloc[1]), abs=1e-9)
    median = fitter.median_survival_time_
    assert (ours.median if ours.median is not None else math.inf) == median
    low, high = median_survival_times(fitter.confidence_interval_).iloc[0]
    assert [math.inf if bound is None else bound for bound in ours.median_ci] == [low, high]
    assert ours.reached_by_cap == pytest.approx(1 - fitter.survival_function_.iloc[-1, 0], abs=1e-9)


def test_kaplan_meier_by_hand_none_censored_all_censored_and_ties() -> None:
    none_censored = kaplan_meier([TimeToEvent(steps=s, reached=True) for s in (10, 20, 20, 40)])
    assert [p.not_reached for p in none_censored.points] == pytest.approx([0.75, 0.25, 0.0])
    assert none_censored.median == 20 and none_censored.reached_by_cap == 1.0
    all_censored = kaplan_meier([TimeToEvent(steps=s, reached=False) for s in (100, 100, 80)])
    assert all(p.not_reached == 1.0 for p in all_censored.points)
    assert all_censored.median is None and all_censored.median_text() == "not reached"
    assert all_censored.reached_by_cap == 0.0
    # a tie of a reach and an end at step 20: the ended episode is still at risk at 20 (4 at risk, 1 reaches)
    tied = kaplan_meier(
        [
            TimeToEvent(steps=10, reached=True),
            TimeToEvent(steps=20, reached=True),
            TimeToEvent(steps=20, reached=False),
            TimeToEvent(steps=30, reached=True),
            TimeToEvent(steps=40, reached=False),
        ]
    )
    assert [(p.step, p.at_risk) for p in tied.points] == [(10, 5), (20, 4), (30, 2), (40, 1)]
    assert [p.not_reached for p in tied.points] == pytest.approx([0.8, 0.6, 0.3, 0.3])
    assert tied.median == 30


def test_logrank_is_scipys_and_lifelines() -> None:
    a = episodes([s for s, _ in STEPS_A], [r for _, r in STEPS_A])
    b = episodes([s for s, _ in STEPS_B], [r for _, r in STEPS_B])
    ours = logrank(a, b)
    reference = logrank_test([x.steps for x in a], [x.steps for x in b], [x.reached for x in a], [x.reached for x in b])
    assert ours.statistic == pytest.approx(reference.test_statistic, abs=1e-9)
    assert ours.chi_square_p == pytest.approx(reference.p_value, abs=1e-9)
    censored = [
        stats.CensoredData(
            uncensored=[x.steps for x in arm if x.reached], right=[x.steps for x in arm if not x.reached]
        )
        for arm in (a, b)
    ]
    scipy_result = stats.logrank(censored[0], censored[1])
    assert ours.chi_square_p == pytest.approx(scipy_result.pvalue, abs=1e-9)
    assert abs(ours.z) == pytest.approx(abs(scipy_result.statistic), abs=1e-9)


def _lifelines_z(x, y, axis):
    """|log-rank z| of lifelines for each permuted (x, y) of (steps, reached) columns: scipy's statistic."""
    statistics = []
    for row_x, row_y in zip(np.atleast_2d(x), np.atleast_2d(y), strict=True):
        steps_x, reached_x = np.divmod(row_x, 2)
        steps_y, reached_y = np.divmod(row_y, 2)
        statistics.append(logrank_test(steps_x, steps_y, reached_x, reached_y).test_statistic)
    return np.asarray(statistics) if np.ndim(x) > 1 else statistics[0]


@pytest.mark.parametrize("paired", [False, True])
def test_the_permutation_logrank_p_is_scipys_exact_permutation_test_of_lifelines_statistic(paired: bool) -> None:
    """The p enumerates every split (or every within-seed swap) of lifelines' log-rank statistic, as scipy does."""
    a = episodes([s for s, _ in STEPS_A[:5]], [r for _, r in STEPS_A[:5]])
    b = episodes([s for s, _ in STEPS_B[:5]], [r for _, r in STEPS_B[:5]])
    encode = [np.array([2 * int(x.steps) + int(x.reached) for x in arm]) for arm in (a, b)]  # one column, both facts
    reference = stats.permutation_test(
        encode,
        _lifelines_z,
        permutation_type="samples" if paired else "independent",
        n_resamples=math.inf,
        alternative="greater",
    )
    ours = logrank(a, b, paired=paired)
    assert ours.exact and ours.permutations == (32 if paired else 252)
    assert ours.p_value == pytest.approx(reference.pvalue, abs=1e-12)


def test_three_against_three_milestone_never_goes_below_the_exact_minimum() -> None:
    """Issue 46: the chi-square approximation said p = 0.025 where no split of 3 + 3 can give less than 0.1."""
    faster, slower = episodes([10, 20, 30], [500] * 3), episodes([40, 50, 60], [500] * 3)
    result = logrank(faster, slower)
    assert result.chi_square_p == pytest.approx(0.0246, abs=1e-3) and result.p_value == pytest.approx(2 / 20)
    assert logrank(faster, slower, paired=True).p_value == pytest.approx(2 / 8)
    assert logrank(faster[:1], slower[:1]).p_value is None  # 1 + 1: no test exists


def test_a_large_milestone_comparison_is_monte_carlo_within_its_error_and_seeded() -> None:
    rng = np.random.default_rng(5)
    a = episodes([int(s) for s in rng.integers(10, 300, 12)], [300] * 12)
    b = episodes([int(s) if s < 300 else None for s in rng.integers(60, 400, 12)], [300] * 12)
    result = logrank(a, b)
    assert not result.exact and result.permutations == 20_000
    exact_share = result.p_value  # within (hits+1)/(N+1) of a binomial share: compare with the chi-square figure
    assert abs(exact_share - result.chi_square_p) < 0.05
    assert logrank(a, b).p_value == result.p_value


def test_logrank_without_any_reach_has_no_test() -> None:
    never = [TimeToEvent(steps=100, reached=False)] * 3
    assert logrank(never, never).p_value is None


def test_holm_by_hand() -> None:
    result = holm([("a", 0.01), ("b", 0.04), ("c", 0.03), ("d", None), ("e", 0.005)], family="four tests")
    adjusted = {test.name: test.adjusted_p for test in result.tests}
    # sorted: e 0.005·4 = 0.02; a 0.01·3 = 0.03; c 0.03·2 = 0.06; b max(0.06, 0.04·1) = 0.06
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "e": 0.02})
    assert {test.name for test in result.tests if test.rejected} == {"a", "e"}
    assert result.excluded == ["d"] and [test.name for test in result.tests] == ["a", "b", "c", "e"]
    assert [t.adjusted_p for t in holm([("x", 0.9), ("y", 0.4)], family="two").tests] == [
        0.9,
        0.8,
    ]  # monotone, capped at 1


def test_the_unpaired_path_is_todays_test_and_says_why() -> None:
    from mcu_arms.stats.basics import compare_means
    from mcu_arms.stats.comparison import compare_metric

    a, b = dict(enumerate(A)), {seed + 10: value for seed, value in enumerate(B)}
    design = pairing("embedded", None, list(a), "embedded", None, list(b))
    result = compare_metric("score", a, b, design, name_a="a", name_b="b")
    today = compare_means("score", A, B, name_a="a", name_b="b")
    assert result.design == "unpaired" and result.unpaired == today and result.p_value == today.p_value
    assert "different seeds" in result.text and result.seeds_needed == today.seeds_needed


def test_holm_over_a_compares_family_reads_the_verdict_on_the_adjusted_p() -> None:
    from mcu_arms.stats.comparison import adjust_family, compare_metric

    paired = pairing("embedded", None, range(6), "embedded", None, range(6))
    clear = compare_metric(
        "score", dict(enumerate([0.0] * 6)), dict(enumerate([53, 40, 60, 55, 47, 70])), paired, name_a="a", name_b="b"
    )
    noise = compare_metric(
        "collect_wood",
        dict(enumerate([1.0, 3, 2, 5, 4, 6])),
        dict(enumerate([2.0, 1, 4, 3, 6, 5])),
        paired,
        name_a="a",
        name_b="b",
    )
    family, adjusted = adjust_family([clear, noise], family="score and one milestone")
    assert clear.distinguishable and clear.p_value == pytest.approx(2 / 64)
    assert adjusted[0].adjusted_p == pytest.approx(min(1.0, 2 * 2 / 64)) and not adjusted[0].distinguishable
    assert [test.p_value for test in family.tests] == [clear.p_value, noise.p_value]
