"""MCU task definitions: the models here, loading from `MCU_benchmark/task_configs/tasks/` below them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ScoringKind = Literal["reward", "milestones", "video"]


class RewardEntry(BaseModel):
    """One reward_cfg / milestone_reward_cfg entry: pays `reward` when counters[event][obj] grows for any obj."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event: str
    identity: str
    objects: tuple[str, ...]
    reward: float = 1.0
    max_reward_times: int = Field(default=1, ge=1)


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    category: str
    text: str
    init_commands: tuple[str, ...] = ()
    reward_cfg: tuple[RewardEntry, ...] = ()
    milestones: tuple[RewardEntry, ...] = ()
    source: Path | None = None

    @property
    def scoring_kind(self) -> ScoringKind:
        if self.milestones:
            return "milestones"
        if self.reward_cfg:
            return "reward"
        return "video"
