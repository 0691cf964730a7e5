"""The statistics at the sizes campaigns run (3–12 seeds per arm), by simulation, printed as tables (issue 46):

1. the milestone test's size (log-rank p by permutation; unpaired splits and paired within-seed swaps) under nulls
   where most episodes reach the milestone, and discrete ones with many ties and episodes that never reach it:
   target <= 0.05 + its Monte Carlo error (2 sd);
2. the paired interval's coverage (Student t, what compare shows; the percentile bootstrap it replaced beside it):
   target 95 % +- 1.5 % where the differences are continuous (discrete differences with many exact zeros cover more:
   a difference of exactly 0 on every seed is a point that holds the true 0);
3. the power at the advised number of seeds (power.seeds_for_power, from a stated distribution), checked by an
   independent simulation that applies compare's own functions (sign_flip_test, mean_interval, Holm over the
   variants): target >= 0.78; beside it the power at the z-based figure compare used to print;
4. `--until-resolved`'s size (group-sequential sign-flip, looks at 4, 8, 12 seeds): target <= 0.05.

    python tests/bench/bench_small_n_stats.py [--reps 1000] [--quick] [--only size|coverage|unpaired|power|sequential]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from mcu_arms.stats.basics import difference_interval, mean_interval, t_quantile  # noqa: E402 - after the sys.path line
from mcu_arms.stats.multiplicity import holm  # noqa: E402 - after the sys.path line
from mcu_arms.stats.paired import sign_flip_test  # noqa: E402 - after the sys.path line
from mcu_arms.stats.power import (  # noqa: E402 - after the sys.path line
    normal_sampler,
    pilot_sampler,
    seeds_for_power,
    sign_flip_p_many,
)
from mcu_arms.stats.sequential import sequential_sign_flip  # noqa: E402 - after the sys.path line
from mcu_arms.stats.survival import TimeToEvent, logrank  # noqa: E402 - after the sys.path line

SIZES = (3, 4, 6, 8, 12)
ALPHA = 0.05
CAP = 100


def _mc_error(rate: float, reps: int) -> float:
    return 2 * math.sqrt(max(rate, ALPHA) * (1 - max(rate, ALPHA)) / reps)


def _milestone_null(kind: str, rng: np.random.Generator, n: int) -> tuple[list[TimeToEvent], list[TimeToEvent]]:
    """Two arms of the same distribution; paired by a seed's difficulty (the same for both arms of a seed)."""
    difficulty = rng.uniform(0.5, 1.5, n)
    arms = []
    for _ in range(2):
        if kind == "most reach":  # continuous, ~85 % reach within the cap
            steps = rng.exponential(50 * difficulty)
        else:  # discrete, score-like: steps in {10, 20, 30} with ties; ~40 % never reach it
            steps = np.where(rng.random(n) < 0.4 * difficulty, CAP + 1, rng.choice([10, 20, 30], n))
        arms.append([TimeToEvent(steps=float(min(s, CAP)), reached=bool(s < CAP)) for s in np.ceil(steps)])
    return arms[0], arms[1]


def milestone_size(reps: int) -> list[str]:
    lines = ["1. milestone test size (target <= 0.05 + MC error)", "null          design     n   size    MC err  ok"]
    for kind in ("most reach", "ties, never"):
        for paired in (False, True):
            for n in SIZES:
                rng = np.random.default_rng([1, n, paired, len(kind)])
                rejected = tested = 0
                for _ in range(reps):
                    a, b = _milestone_null(kind, rng, n)
                    p = logrank(a, b, paired=paired).p_value
                    tested += 1
                    rejected += p is not None and p < ALPHA
                size = rejected / tested
                error = _mc_error(size, tested)
                ok = "yes" if size <= ALPHA + error else "NO"
                design = "paired" if paired else "unpaired"
                lines.append(f"{kind:<13} {design:<9} {n:>3}  {size:.3f}  {error:.3f}  {ok}")
    return lines


NULLS = ("normal", "t3 (heavy tails)", "score-like", "score-like, sparse")
EFFECTS = ("normal", "score-like", "exponential (skew)", "lognormal (skew)")


def _differences(kind: str, null: bool, rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, float]:
    """reps x n paired differences and their true mean. Under a null the two arms of a seed are exchangeable, so the
    differences are symmetric about 0; an effect may be skewed."""
    if kind == "normal":
        return (0.0 if null else 2.0) + 3.0 * rng.standard_normal((reps, n)), 0.0 if null else 2.0
    if kind == "t3 (heavy tails)":
        return rng.standard_t(3, (reps, n)), 0.0
    if kind == "exponential (skew)":
        return rng.exponential(2.0, (reps, n)) - 1.0, 1.0
    if kind == "lognormal (skew)":
        return rng.lognormal(0.0, 1.0, (reps, n)), math.exp(0.5)
    # score-like: each arm reaches 5 milestones with a seed's difficulty; many exact zeros and ties
    low, high = (0.02, 0.3) if kind == "score-like, sparse" else (0.2, 0.9)
    difficulty = rng.uniform(low, high, (reps, n, 1))
    factor = 1.0 if null else 0.8
    a = (rng.random((reps, n, 5)) < difficulty).sum(axis=2)
    b = (rng.random((reps, n, 5)) < difficulty * factor).sum(axis=2)
    return (a - b).astype(float), 5 * (low + high) / 2 * (1 - factor)


def _hall_covers(data: np.ndarray, truth: float) -> np.ndarray:
    """Hall's (1992) skewness-corrected t interval (a candidate: a monotone cubic transform of t, t quantiles)."""
    n = data.shape[1]
    mean, sd = data.mean(axis=1), data.std(axis=1, ddof=1)
    third = ((data - mean[:, None]) ** 3).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(sd > 0, third / sd**3, 0.0)
    a = np.where(np.abs(gamma) < 1e-9, 1e-9, gamma / (3 * math.sqrt(n)))
    q = t_quantile(0.95, n - 1)

    def inverse(x: float) -> np.ndarray:
        return (np.cbrt(1 + 3 * a * (x - a / 2)) - 1) / a

    ends = np.stack([mean - sd / math.sqrt(n) * inverse(q), mean - sd / math.sqrt(n) * inverse(-q)])
    return (ends.min(axis=0) <= truth) & (truth <= ends.max(axis=0))


def _judged(coverage: float, reps: int) -> str:
    error = 2 * math.sqrt(0.95 * 0.05 / reps)
    if abs(coverage - 0.95) <= 0.015 + error:
        return "yes"
    return "over" if coverage > 0.95 else "UNDER"


def interval_coverage(reps: int) -> list[str]:
    lines = [
        "2. paired 95% interval coverage (target 0.95 +- 0.015 + MC error under nulls, where the arms of a seed are",
        "   exchangeable; 'over' is conservative, a discreteness no exact interval escapes: the sign-flip column)",
        "   t: what compare shows; candidates beside it: the interval inverting the exact sign-flip test (infinite",
        "   below 6 pairs), Hall's skewness-corrected t; and the percentile bootstrap compare used to show",
        "differences                  n   t      ok     sign-flip  Hall   bootstrap",
    ]
    for null, kinds in ((True, NULLS), (False, EFFECTS)):
        for kind in kinds:
            for n in SIZES:
                rng = np.random.default_rng([2, n, len(kind), null])
                data, truth = _differences(kind, null, rng, reps * 10, n)
                half = t_quantile(0.95, n - 1) * data.std(axis=1, ddof=1) / math.sqrt(n)
                mean = data.mean(axis=1)
                t_cover = float(np.mean((mean - half <= truth) & (truth <= mean + half)))
                few = data[: reps // 2]
                sign_flip = float(np.mean(sign_flip_p_many(data[: reps * 2] - truth) >= ALPHA))
                hall = float(np.mean(_hall_covers(data, truth)))
                drawn = few[np.arange(len(few))[:, None, None], rng.integers(0, n, (len(few), 1000, n))].mean(axis=2)
                low, high = np.quantile(drawn, [0.025, 0.975], axis=1)
                boot = float(np.mean((low <= truth) & (truth <= high)))
                judged = _judged(t_cover, reps * 10) if null else "-"
                label = f"{'null' if null else 'effect'}: {kind}"
                lines.append(
                    f"{label:<27} {n:>3}   {t_cover:.3f}  {judged:<5}  {sign_flip:.3f}      {hall:.3f}  {boot:.3f}"
                )
    return lines


def _arm_values(kind: str, rng: np.random.Generator, reps: int, n: int, scale: float) -> tuple[np.ndarray, float]:
    """reps x n values of one arm and their true mean: normal, or a score out of 5 milestones (zeros and ties)."""
    if kind == "normal":
        return 10.0 + scale * rng.standard_normal((reps, n)), 10.0
    difficulty = rng.uniform(0.2, 0.9, (reps, n, 1)) * min(1.0, scale / 3)
    return (rng.random((reps, n, 5)) < difficulty).sum(axis=2).astype(float), 5 * 0.55 * min(1.0, scale / 3)


def unpaired_coverage(reps: int) -> list[str]:
    """An arm's mean (Student t) and an unpaired difference (Welch t), beside the percentile bootstrap they replaced."""
    lines = [
        "2b. an arm's mean (Student t) and the unpaired difference of two arms (Welch t) (target 0.95 +- 0.015)",
        "values                                 n   t / Welch  ok     bootstrap (replaced)",
    ]
    for kind in ("normal", "score-like"):
        for n in SIZES:
            rng = np.random.default_rng([5, n, len(kind)])
            data, truth = _arm_values(kind, rng, reps * 10, n, 3.0)
            half = t_quantile(0.95, n - 1) * data.std(axis=1, ddof=1) / math.sqrt(n)
            cover = float(np.mean(np.abs(data.mean(axis=1) - truth) <= half))
            few = data[: reps // 2]
            drawn = few[np.arange(len(few))[:, None, None], rng.integers(0, n, (len(few), 1000, n))].mean(axis=2)
            low, high = np.quantile(drawn, [0.025, 0.975], axis=1)
            boot = float(np.mean((low <= truth) & (truth <= high)))
            label = f"one arm's mean: {kind}"
            lines.append(f"{label:<38} {n:>3}   {cover:.3f}      {_judged(cover, reps * 10):<5}  {boot:.3f}")
    for kind, scales in (("normal", (3.0, 3.0)), ("normal", (1.0, 5.0)), ("score-like", (3.0, 1.5))):
        for n in SIZES:
            rng = np.random.default_rng([6, n, len(kind), int(scales[1])])
            a, truth_a = _arm_values(kind, rng, reps * 10, n, scales[0])
            b, truth_b = _arm_values(kind, rng, reps * 10, n, scales[1])
            covered = 0
            for row_a, row_b in zip(a, b, strict=True):
                interval = difference_interval(list(row_a), list(row_b))
                covered += interval is not None and interval.low <= truth_a - truth_b <= interval.high
            cover = covered / len(a)
            few_a, few_b = a[: reps // 2], b[: reps // 2]
            index = np.arange(len(few_a))[:, None, None]
            means_a = few_a[index, rng.integers(0, n, (len(few_a), 1000, n))].mean(axis=2)
            means_b = few_b[index, rng.integers(0, n, (len(few_b), 1000, n))].mean(axis=2)
            low, high = np.quantile(means_a - means_b, [0.025, 0.975], axis=1)
            boot = float(np.mean((low <= truth_a - truth_b) & (truth_a - truth_b <= high)))
            label = f"unpaired: {kind}, sd {scales[0]:g} vs {scales[1]:g}"
            lines.append(f"{label:<38} {n:>3}   {cover:.3f}      {_judged(cover, reps * 10):<5}  {boot:.3f}")
    return lines


def _resolved_by_compare(rows: np.ndarray, variants: int, rng: np.random.Generator, sampler) -> float:
    """The share of experiments in which variant 0 is distinguishable as compare decides it: exact sign-flip p,
    Holm over `variants` variants (the others drawn from the same distribution), t interval excluding 0."""
    hits = 0
    for row in rows:
        others = [sampler(rng, 1, len(row))[0] for _ in range(variants - 1)]
        family = holm([(str(i), sign_flip_test(d).p_value) for i, d in enumerate([row, *others])], family="variants")
        interval = mean_interval(list(row))
        excludes = interval is not None and (interval.low > 0 or interval.high < 0)
        hits += bool(family.tests[0].rejected and excludes)
    return hits / len(rows)


def power_at_advice(reps: int) -> list[str]:
    lines = [
        "3. power at the advised seeds (target >= 0.78), checked with compare's own functions",
        "scenario                        variants  advised  power   z-based N  its power",
    ]
    scenarios = {
        "normal, effect = 1 sd": normal_sampler(1.0, 1.0),
        "normal, effect = 0.6 sd": normal_sampler(0.6, 1.0),
        "score-like {-1,0,0,1,1,2}": pilot_sampler([-1.0, 0.0, 0.0, 1.0, 1.0, 2.0]),
        "score-like {0,0,0,1,2}": pilot_sampler([0.0, 0.0, 0.0, 1.0, 2.0]),
    }
    for name, sampler in scenarios.items():
        for variants in (1, 2, 4):
            advised = seeds_for_power(sampler, at_least=2, variants=variants)
            if advised is None:
                lines.append(f"{name:<31} {variants:>8}  > 64")
                continue
            rng = np.random.default_rng([3, variants, len(name)])
            rows = sampler(rng, reps, advised)
            power = _resolved_by_compare(rows, variants, rng, sampler)
            pilot = sampler(np.random.default_rng(9), 1, 200_000)[0]
            z_n = max(6, math.ceil(((1.959964 + 0.841621) * pilot.std(ddof=1) / abs(pilot.mean())) ** 2))
            z_power = _resolved_by_compare(sampler(rng, reps, z_n), variants, rng, sampler)
            ok = "" if power >= 0.78 else "  NO"
            lines.append(f"{name:<31} {variants:>8}  {advised:>7}  {power:.3f}   {z_n:>9}  {z_power:.3f}{ok}")
    return lines


def until_resolved_size(reps: int) -> list[str]:
    lines = ["4. --until-resolved size, looks at 4, 8, 12 of 12 seeds (target <= 0.05)", "null          size   MC err"]
    for kind in ("normal", "score-like"):
        rng = np.random.default_rng([4, len(kind)])
        rejected = 0
        for _ in range(reps):
            if kind == "normal":
                differences = rng.standard_normal(12)
            else:
                difficulty = rng.uniform(0.2, 0.9, (12, 1))
                a = (rng.random((12, 5)) < difficulty).sum(axis=1)
                b = (rng.random((12, 5)) < difficulty).sum(axis=1)
                differences = (a - b).astype(float)
            rejected += sequential_sign_flip(list(differences), [4, 8, 12], max_seeds=12).rejected
        size = rejected / reps
        lines.append(f"{kind:<13} {size:.3f}  {_mc_error(size, reps):.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated experiments per cell (coverage: x10)")
    parser.add_argument("--quick", action="store_true", help="100 per cell: a smoke run, not a measurement")
    sections = ["size", "coverage", "unpaired", "power", "sequential"]
    parser.add_argument("--only", choices=sections, help="one table only")
    args = parser.parse_args()
    reps = 100 if args.quick else args.reps
    sections = {
        "size": milestone_size,
        "coverage": interval_coverage,
        "unpaired": unpaired_coverage,
        "power": power_at_advice,
        "sequential": until_resolved_size,
    }
    for name, section in sections.items():
        if args.only not in (None, name):
            continue
        started = time.perf_counter()
        print("\n".join(section(reps)))
        print(f"({time.perf_counter() - started:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main()
