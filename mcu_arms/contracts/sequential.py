"""Which look of a sequential run (`mcu-arms run --until-resolved`) an episode belonged to: recorded in its plan and
its run report, so that `compare` can say an experiment was sequential and recompute its boundaries from the episodes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from mcu_arms.contracts.limits import MAX_SEEDS_PER_ARM, MAX_VARIANTS

SequentialMethod = Literal["lan-demets-obf-sign-flip"]


class SequentialLook(BaseModel):
    """The look of a sequential run (`run --until-resolved`) an episode belonged to, and the design of that run: enough
    to recompute every boundary and the alpha spent from the episodes alone."""

    look: int = Field(ge=1)  # 1, 2, ...: the batch of seeds the episode ran in
    primary: str  # the metric the stopping rule reads
    # the planned maximum: the information fraction of a look is its seeds over this
    max_seeds: int = Field(ge=1, le=MAX_SEEDS_PER_ARM)
    batch: int = Field(ge=1, le=MAX_SEEDS_PER_ARM)  # seeds per look
    alpha: float = Field(gt=0, lt=1)  # for the whole family of comparisons
    comparisons: int = Field(ge=1, le=MAX_VARIANTS)  # variants tested against the baseline: alpha / comparisons each
    method: SequentialMethod = "lan-demets-obf-sign-flip"

    @model_validator(mode="after")
    def _within_its_maximum(self) -> SequentialLook:
        """A look starts within the run's own maximum of seeds (a later one could never have been taken)."""
        if (self.look - 1) * self.batch >= self.max_seeds:
            raise ValueError(
                f"look {self.look} of {self.batch} seeds each starts past its own maximum of {self.max_seeds} seeds"
            )
        return self
