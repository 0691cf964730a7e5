"""The planned agent's trajectory: one JSONL line per high-level action, with seed 002's fields.

`<purple dir>/task_NN/trajectory.jsonl`. A line is written when its action ends (succeeded, failed, interrupted by
the reflex, or needing a re-plan): the state it was decided on, the candidates offered, the choice and its
probabilities, what came of it (judged by the inventory delta) and the state after. Every field is on every line;
a latency nobody reported is null, never 0. Lines carry a schema_version and are read through `read_trajectory`,
the one place a later schema will be migrated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcu_arms.contracts.errors import validation_summary
from mcu_arms.contracts.game_state import GameState, Skill
from mcu_arms.contracts.planned import PlanStep

TRAJECTORY_SCHEMA_VERSION = 1
TRAJECTORY_FILE = "trajectory.jsonl"

# How a high-level action ended. `action_needs_replan`: an action with side effects (craft, place) was interrupted,
# so whether its effect happened is for the next decision to find out, never for a blind retry.
ActionStatus = Literal["succeeded", "failed", "interrupted", "action_needs_replan"]
# What the agent was doing: working down its plan, looking after a vital, facing a threat, recovering after one, or
# waiting for a plan.
Phase = Literal["plan", "survival", "threat", "recovery", "no_plan"]
DecisionSource = Literal["policy", "fallback", "only_candidate"]


class ModelInfo(BaseModel):
    backend: str  # planner: "chat"; policy: "decision_service" | "chat"
    model: str | None
    revision: str | None


class CandidateAction(BaseModel):
    """One action the executor offers: its id is what the policy chooses."""

    id: str
    skill: Skill
    target: str | None = None  # the item, tile or entity kind it acts on
    count: int | None = None  # collect: held when it is done
    description: str


class ActionResult(BaseModel):
    inventory_delta: dict[str, int] = Field(description="items and vitals gained (+) or spent (-) during the action")
    steps: int = Field(description="simulator steps the action took")
    detail: str


class ReflexInterruption(BaseModel):
    """A health drop, and the local reflex that stopped the running action before any model was asked."""

    observed_step: int = Field(description="the step whose observation showed the drop")
    interrupted_step: int = Field(description="the step the running action was stopped at: the same one")
    health_before: float
    health_after: float
    interrupted_action: str | None = Field(description="the action stopped (None: none was running)")
    latency_ms: float = Field(description="from the observation's arrival to the interruption")
    threats: list[str] = Field(description="hostile kinds in view")
    simulator_stop_ms: float | None = Field(
        default=None,
        description="a simulator that takes skills stopped the skill itself: from the damage to its answer",
    )


class TrajectoryRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = TRAJECTORY_SCHEMA_VERSION
    run_id: str = Field(description="one purple process (one arm run)")
    episode_id: str = Field(description="one episode (one A2A context)")
    step: int = Field(description="the simulator step the action was decided at")
    end_step: int = Field(description="the step it ended at")
    world_seed: int | None = Field(
        description="the world's seed as the simulator said it; None when it cannot be read (the episode says why)"
    )
    goal: str
    subgoal: PlanStep | None = Field(description="the plan step the action served (None outside the plan)")
    phase: Phase
    planner: ModelInfo
    policy: ModelInfo
    state: GameState = Field(description="the state decided on (its capability list is in the episode report)")
    available_actions: list[CandidateAction]
    selected_action: str
    action_probabilities: dict[str, float]
    decision_source: DecisionSource
    invalid_output: str | None = Field(description="why the policy's answer was rejected, when it was")
    action_status: ActionStatus
    result: ActionResult
    next_state: GameState
    planner_latency_ms: float | None = Field(description="the call that produced the plan, on the first line after")
    decision_latency_ms: float | None = Field(description="the policy call for this action (None: no call)")
    action_duration_ms: float | None = Field(description="wall time from the action's first step to its end")
    reflex: ReflexInterruption | None


def read_trajectory(path: Path) -> list[TrajectoryRecord]:
    """Every line of a trajectory file; ValueError naming the file and line when one is not a record."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            records.append(TrajectoryRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as error:
            detail = validation_summary(error, limit=1) if isinstance(error, ValidationError) else str(error)
            raise ValueError(f"{path}:{number}: not a trajectory record ({detail})") from None
    return records
