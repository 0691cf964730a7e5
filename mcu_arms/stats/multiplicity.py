"""Many comparisons, one error rate: Holm–Bonferroni over a family of tests.

Holm's step-down adjustment controls the chance of any false "distinguishable" in the family at ALPHA, and is
uniformly more powerful than Bonferroni. The verdict reads the adjusted p; both are shown. A test that could not be
made (p is None) is not in the family.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from mcu_arms.stats.basics import ALPHA

HOLM_METHOD = "Holm–Bonferroni step-down adjustment (family-wise error rate)"


class AdjustedTest(BaseModel):
    name: str
    p_value: float
    adjusted_p: float
    rejected: bool  # adjusted_p < alpha


class Holm(BaseModel):
    family: str  # which tests form the family, in words
    alpha: float
    tests: list[AdjustedTest]  # in the order given
    excluded: list[str]  # named tests without a p-value
    method: str = HOLM_METHOD

    def adjusted(self, name: str) -> AdjustedTest | None:
        return next((test for test in self.tests if test.name == name), None)


def holm(p_values: Sequence[tuple[str, float | None]], *, family: str, alpha: float = ALPHA) -> Holm:
    """Adjusted p of the i-th smallest of m: max over j ≤ i of min(1, (m − j + 1)·p_(j))."""
    present = [(index, name, p) for index, (name, p) in enumerate(p_values) if p is not None]
    ordered = sorted(present, key=lambda item: (item[2], item[0]))
    m = len(ordered)
    adjusted: dict[int, float] = {}
    running = 0.0
    for rank, (index, _name, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    tests = [
        AdjustedTest(name=name, p_value=p, adjusted_p=adjusted[index], rejected=adjusted[index] < alpha)
        for index, name, p in present
    ]
    return Holm(family=family, alpha=alpha, tests=tests, excluded=[name for name, p in p_values if p is None])
