"""The stopping rule of `run --until-resolved`, by simulation: campaigns with no true difference, looked at after
every batch and stopped when every variant's test crossed, reject at most alpha; the naive rule (a fixed-n test at
each look) does not."""

from __future__ import annotations

import math
import random

import pytest

from mcu_arms.contracts.sequential import SequentialLook
from mcu_arms.stats.paired import sign_flip_test
from mcu_arms.stats.sequential import (
    obf_alpha_spent,
    resolved,
    sequential_compare,
    sequential_experiment,
    sequential_sign_flip,
)

CAMPAIGNS = 1500
ALPHA = 0.05


def _design(look: int, *, max_seeds: int = 12, batch: int = 4, comparisons: int = 1) -> SequentialLook:
    return SequentialLook(
        look=look, primary="score", max_seeds=max_seeds, batch=batch, alpha=ALPHA, comparisons=comparisons
    )


def _null_campaign(rng: random.Random, seeds: int) -> dict[int, float]:
    """Scores whose distribution does not depend on the arm: a world difficulty per seed plus episode noise, and
    coarse (ties and zero differences happen, as with milestone counts)."""
    return {seed: float(round(rng.gauss(0, 2))) for seed in range(seeds)}


def _run_until_resolved(rng: random.Random, variants: int, max_seeds: int, batch: int) -> tuple[bool, bool]:
    """(the sequential rule rejected some variant, the naive rule did), for one campaign of the null."""
    difficulty = {seed: rng.gauss(0, 5) for seed in range(max_seeds)}
    arms = [{s: difficulty[s] + v for s, v in _null_campaign(rng, max_seeds).items()} for _ in range(variants + 1)]
    baseline, others = arms[0], arms[1:]
    naive = False
    for look in range(1, max_seeds // batch + 1):
        look_of_seed = {seed: seed // batch + 1 for seed in range(look * batch)}
        design = _design(look, max_seeds=max_seeds, batch=batch, comparisons=variants)
        tests = [sequential_compare(other, baseline, look_of_seed, design) for other in others]
        naive = naive or any(
            sign_flip_test([other[s] - baseline[s] for s in look_of_seed]).p_value < ALPHA / variants
            for other in others
        )
        if resolved(tests):
            break
    return any(test.rejected for test in tests), naive


@pytest.mark.parametrize(("variants", "max_seeds", "batch", "peeking_inflates"), [(1, 16, 2, True), (2, 12, 4, False)])
@pytest.mark.slow
def test_no_true_difference_rejects_at_most_alpha_however_often_it_is_looked_at(
    variants: int, max_seeds: int, batch: int, peeking_inflates: bool
) -> None:
    """With 8 looks the naive rule's error is well above alpha; with 3 coarse looks at alpha / 2 it barely moves, but
    the sequential rule must hold in both."""
    rng = random.Random(20261201 + variants)
    outcomes = [_run_until_resolved(rng, variants, max_seeds, batch) for _ in range(CAMPAIGNS)]
    sequential = sum(seq for seq, _ in outcomes) / CAMPAIGNS
    naive = sum(peek for _, peek in outcomes) / CAMPAIGNS
    error = math.sqrt(ALPHA * (1 - ALPHA) / CAMPAIGNS)
    assert sequential <= ALPHA + 3 * error, (sequential, naive)
    if peeking_inflates:
        assert naive > ALPHA + 3 * error, (sequential, naive)  # the peeking problem is real here, and avoided above


def test_a_large_same_sign_difference_stops_early_and_spends_at_most_what_is_allowed() -> None:
    result = sequential_sign_flip(
        [-53.0, -40, -60, -55, -47, -70, -50, -38, -44, -61, -52, -49], [4, 8, 12], max_seeds=12
    )
    assert result.rejected and [look.n for look in result.looks] == [4, 8]
    assert all(look.alpha_spent <= look.alpha_allowed + 1e-12 for look in result.looks)
    assert result.looks[0].boundary is None  # 4 pairs: the smallest exact p (1/8) is far above what look 1 may spend
    assert obf_alpha_spent(1.0, ALPHA) == pytest.approx(ALPHA) and obf_alpha_spent(0.5, ALPHA) < 0.006


def test_the_exact_boundaries_spend_exactly_what_the_enumeration_says() -> None:
    """Recount by brute force: over all 2^8 sign vectors, the share that stops at look 1 or 2 is the alpha spent."""
    differences = [3.0, -1.0, 2.0, 5.0, -4.0, 1.0, 2.5, 0.5]
    result = sequential_sign_flip(differences, [6, 8], max_seeds=8, alpha=0.2)
    magnitudes = [abs(d) for d in differences]
    stopped = 0
    for index in range(256):
        signed = [m * (-1 if index >> i & 1 else 1) for i, m in enumerate(magnitudes)]
        first = result.looks[0].boundary
        if first is not None and abs(sum(signed[:6])) / 6 >= first - 1e-9:
            stopped += 1
            continue
        second = result.looks[-1].boundary if len(result.looks) > 1 else None
        if second is not None and abs(sum(signed)) / 8 >= second - 1e-9:
            stopped += 1
    if not result.rejected or len(result.looks) == 2:
        assert stopped / 256 == pytest.approx(result.looks[-1].alpha_spent, abs=1e-12)
    assert result.looks[-1].alpha_spent <= 0.2


def test_a_fixed_n_reading_says_it_was_sequential() -> None:
    records = [_design(1)] * 4 + [_design(2)] * 4 + [None]
    experiment = sequential_experiment(records)
    assert experiment is not None and experiment.looks == [4, 8] and experiment.max_seeds == 12
    assert experiment.alpha_allowed == pytest.approx(obf_alpha_spent(8 / 12, ALPHA))
    assert "alpha allowed by its last look" in experiment.text and "alpha spent" not in experiment.text
    assert "sequential experiment" in experiment.text and "Lan–DeMets" in experiment.text
    assert sequential_experiment([None, None]) is None


def test_beyond_2_to_the_20_signs_the_boundaries_are_sampled_and_still_spend_within_their_error() -> None:
    rng = random.Random(5)
    differences = [rng.gauss(0.3, 1) for _ in range(24)]
    result = sequential_sign_flip(differences, [12, 24], max_seeds=24)
    assert [look.n for look in result.looks][-1] in (12, 24)
    error = 4 * math.sqrt(ALPHA / 100_000)
    assert all(look.alpha_spent <= look.alpha_allowed + error for look in result.looks)
    assert sequential_sign_flip(differences, [12, 24], max_seeds=24) == result  # seeded
