"""The across-tasks intervals at the sizes campaigns run (issue 46): coverage of the stratified bootstrap 95 % interval
of the interquartile mean and of the probability of improvement (stats/across_tasks.py, what compare shows), over 3
tasks whose normalised scores are score-like (many zeros, ties, a few full scores), at 3–12 seeds per task. Printed as
a table; no target is asserted (rliable's intervals are percentile bootstraps: at small n they cover less than 95 %,
and the table says how much less).

    python tests/bench/bench_across_tasks.py [--reps 400] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from mcu_arms.stats.across_tasks import across_tasks  # noqa: E402 - after the sys.path line

SIZES = (3, 4, 6, 8, 12)
# Per task: normalised score values and their probabilities (score-like: zeros and ties).
TASKS = {
    "wood": ([0.0, 0.2, 0.4, 1.0], [0.3, 0.3, 0.2, 0.2]),
    "table": ([0.0, 0.5, 1.0], [0.5, 0.3, 0.2]),
    "stone": ([0.0, 0.1, 0.3, 0.6, 0.9], [0.2, 0.2, 0.2, 0.2, 0.2]),
}
SHIFTED = {  # the arm compared: each task's scores one value higher with some probability
    name: (values, list(np.roll(probs, 1))) for name, (values, probs) in TASKS.items()
}


def _draw(rng: np.random.Generator, tasks: dict[str, tuple[list[float], list[float]]], n: int) -> dict[str, Any]:
    return {
        name: dict(enumerate(rng.choice(values, size=n, p=probs).tolist())) for name, (values, probs) in tasks.items()
    }


def _true_iqm(tasks: dict[str, tuple[list[float], list[float]]], rng: np.random.Generator) -> float:
    """The population's IQM: of the tasks' score distributions pooled with equal weight (a very large sample)."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.concatenate([rng.choice(v, size=400_000, p=p) for v, p in tasks.values()]), 0.25))


def _true_improvement(arm: dict, base: dict) -> float:
    total = 0.0
    for name in arm:
        (va, pa), (vb, pb) = arm[name], base[name]
        pairs = [(a, p, b, q) for a, p in zip(va, pa, strict=True) for b, q in zip(vb, pb, strict=True)]
        total += sum(p * q * (1.0 if a > b else 0.5 if a == b else 0.0) for a, p, b, q in pairs)
    return total / len(arm)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 100 if args.quick else args.reps
    rng = np.random.default_rng(46)
    truth_poi = _true_improvement(SHIFTED, TASKS)
    truth_iqm = _true_iqm(TASKS, rng)
    print(f"{len(TASKS)} score-like tasks; {reps} experiments per row; stratified bootstrap 95% percentile intervals")
    print(f"true IQM (of the baseline's population) {truth_iqm:.3f}; true P(arm > baseline) {truth_poi:.3f}")
    print("| seeds per task | IQM coverage | IQM mean width | P(improvement) coverage | mean width | s |")
    print("|---|---|---|---|---|---|")
    for n in SIZES:
        started = time.perf_counter()
        hits_iqm = hits_poi = 0
        widths_iqm, widths_poi = [], []
        for _ in range(reps):
            result = across_tasks({"base": _draw(rng, TASKS, n), "arm": _draw(rng, SHIFTED, n)}, "base")
            iqm = result.arms[0].iqm_interval
            poi = result.improvement[0].interval
            assert iqm is not None and poi is not None
            hits_iqm += iqm.low <= truth_iqm <= iqm.high
            hits_poi += poi.low <= truth_poi <= poi.high
            widths_iqm.append(iqm.high - iqm.low)
            widths_poi.append(poi.high - poi.low)
        print(
            f"| {n} | {hits_iqm / reps:.3f} | {np.mean(widths_iqm):.2f} | {hits_poi / reps:.3f} | "
            f"{np.mean(widths_poi):.2f} | {time.perf_counter() - started:.1f} |"
        )


if __name__ == "__main__":
    main()
