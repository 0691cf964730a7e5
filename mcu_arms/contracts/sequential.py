"""Which look of a sequential run (`mcu-arms run --until-resolved`) an episode belonged to: recorded in its plan and
its run report, so that `compare` can say an experiment was sequential and recompute its boundaries from the episodes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

SequentialMethod = Literal["lan-demets-obf-sign-flip"]


class SequentialLook(BaseModel):
    """The look of a sequential run (`run --until-resolved`) an episode belonged to, and the design of that run: enough
    to recompute every boundary and the alpha spent from the episodes alone."""

    look: int  # 1, 2, ...: the batch of seeds the episode ran in
    primary: str  # the metric the stopping rule reads
    max_seeds: int  # the planned maximum: the information fraction of a look is its seeds over this
    batch: int  # seeds per look
    alpha: float  # for the whole family of comparisons
    comparisons: int  # variants tested against the baseline; each test gets alpha / comparisons (Bonferroni)
    method: SequentialMethod = "lan-demets-obf-sign-flip"
