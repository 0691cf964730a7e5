"""The statistics `compare` states about replicates, against cases computed by hand."""

from __future__ import annotations

import math

import pytest

from mcu_arms.stats.basics import (
    MIN_SEEDS_EXACT,
    compare_means,
    milestone_stats,
    permutation_p,
    quantile,
    seeds_needed,
    summarise,
)


def test_identical_arms_show_no_difference() -> None:
    same = [3.0, 5.0, 7.0]
    result = compare_means("score", same, same, name_a="b", name_b="a")
    assert result.estimate == 0 and result.p_value == 1.0 and not result.distinguishable
    # issue 46: a zero mean with a wide interval is not "no difference" (unpaired arms can differ seed by seed)
    assert result.seeds_needed is None and "not resolved at n = 3 + 3" in result.text
    flat = compare_means("score", [0.0] * 3, [0.0] * 3, name_a="b", name_b="a")
    assert "no difference: every value is the same at n = 3 + 3" in flat.text
    assert result.ci is not None and result.ci.low <= 0 <= result.ci.high


def test_a_large_fixed_difference_is_distinguishable() -> None:
    high, low = [10.0, 10.2, 10.4, 10.6, 10.8], [0.0, 0.2, 0.4, 0.6, 0.8]
    result = compare_means("score", high, low, name_a="good", name_b="bad")
    assert result.estimate == pytest.approx(10.0)
    # every one of the C(10, 5) = 252 splits but the observed one and its mirror is less extreme
    assert result.p_value == pytest.approx(2 / 252)
    assert result.distinguishable and result.ci.low > 0
    assert "good − bad = +10.00" in result.text and "distinguishable from seed noise at n = 5 + 5" in result.text


def test_three_seeds_cannot_distinguish_anything_and_say_how_many_would() -> None:
    result = compare_means("score", [10.0, 11.0, 12.0], [0.0, 1.0, 2.0], name_a="a", name_b="b")
    assert result.p_value == pytest.approx(2 / 20)  # the smallest p an exact test of 3 + 3 can give
    assert not result.distinguishable
    assert result.seeds_needed == MIN_SEEDS_EXACT and "about 4 seeds per arm would resolve" in result.text


def test_seeds_needed_follows_the_normal_approximation() -> None:
    a, b = [1.0, 3.0, 5.0], [0.0, 2.0, 4.0]  # difference 1, pooled variance 4
    assert seeds_needed(a, b) == math.ceil(2 * 4 * (1.959964 + 0.841621) ** 2)


def test_the_same_data_gives_the_same_interval() -> None:
    values = [1.0, 4.0, 2.5, 8.0]
    assert compare_means("x", values, [0.0, 1.0], name_a="a", name_b="b") == compare_means(
        "x", values, [0.0, 1.0], name_a="a", name_b="b"
    )


def test_one_replicate_gives_no_interval() -> None:
    summary = summarise([42.0])
    assert summary.n == 1 and summary.mean == 42.0 and summary.ci is None and summary.std is None
    assert summary.text() == "42.00 (n = 1: no interval)"
    result = compare_means("score", [42.0], [40.0], name_a="a", name_b="b")
    assert result.ci is None and "no interval can be given" in result.text


def test_exact_permutation_by_hand() -> None:
    # pooled [1, 2, 3, 4]: splits into two pairs; observed {3, 4} vs {1, 2} is one of the 2 most extreme of 6
    assert permutation_p([3.0, 4.0], [1.0, 2.0]) == pytest.approx(2 / 6)


def test_quantiles_interpolate_like_numpy() -> None:
    assert quantile([1, 2, 3, 4], 0.25) == 1.75 and quantile([1, 2, 3, 4], 0.5) == 2.5 and quantile([7], 0.9) == 7


def test_milestones_reached_k_of_n_and_no_median_of_those_that_reached_it() -> None:
    stats = milestone_stats("t", "collect_wood", [12, None, 30, 18])
    assert (stats.reached, stats.n, stats.step) == (3, 4, None), "steps over episodes: the Kaplan–Meier curve's"
    assert stats.text() == "3/4"
    assert milestone_stats("t", "collect_wood", [12]).text() == "1/1 @ 12"
    assert milestone_stats("t", "diamond", [None, None]).text() == "0/2"
