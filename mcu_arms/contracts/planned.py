"""What the `planned` agent (seed 002's planner, policy and reflex) agrees on with its models and its readers.

- The plan contract: ordered steps `{subgoal, method, item, count}`, where `count` is the minimum inventory that
  completes the step. Completion is judged from the real inventory each time the agent reaches a step (crafting
  consumes materials), a place step from the view (a placed block is not in the inventory).
- The decision contract: a choice among the candidate ids and a probability for exactly every candidate, each in
  [0, 1], summing to 1 within PROBABILITY_TOLERANCE. Anything else is `invalid_policy_output`.
- The planner and policy endpoints' defaults, stated once.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from mcu_arms.contracts.game_state import PlanMethod

# How the policy is reached: a Kev-style decision service (POST /v1/systemone, revision from /v1/models), or an
# OpenAI-compatible chat model asked for the same JSON.
PolicyBackend = Literal["decision_service", "chat"]
POLICY_BACKENDS: tuple[PolicyBackend, ...] = get_args(PolicyBackend)
DEFAULT_POLICY_BACKEND: PolicyBackend = "decision_service"
# A 27B planner writes a ten-step plan in tens of seconds on one GPU; a 4B decision head answers in well under one.
DEFAULT_PLANNER_TIMEOUT_S = 60.0
DEFAULT_POLICY_TIMEOUT_S = 10.0
PLAN_ATTEMPTS = 3  # an invalid plan is rejected with its reason and asked again, this many times in all
MAX_PLAN_STEPS = 12
PROBABILITY_TOLERANCE = 0.001
MAX_CANDIDATES = 255  # the decision service's limit on a choice question

# What a model answered that the agent rejected (agent behaviour: counted and shown, never mixed with failures).
InvalidOutput = Literal["invalid_plan", "invalid_replan", "invalid_policy_output"]
INVALID_OUTPUTS: tuple[InvalidOutput, ...] = get_args(InvalidOutput)
# A model call that brought no answer at all (infrastructure: counted by cause and alerted).
ModelFailure = Literal["planner_timeout", "planner_error", "policy_timeout", "policy_error"]
MODEL_FAILURES: tuple[ModelFailure, ...] = get_args(ModelFailure)


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subgoal: str = Field(default="", description="the step in words; a re-plan may reword it, nothing else")
    method: PlanMethod
    item: str
    count: int = Field(ge=1, description="the minimum inventory (place: blocks in view) that completes the step")

    def contract(self) -> tuple[str, str, int]:
        """What a re-plan may never change."""
        return self.method, self.item, self.count


class Plan(BaseModel):
    goal: str
    steps: list[PlanStep] = Field(min_length=1, max_length=MAX_PLAN_STEPS)


class Decision(BaseModel):
    """A validated policy answer (or the executor's fallback, `source` says which)."""

    choice: str
    probabilities: dict[str, float]
    source: Literal["policy", "fallback"] = "policy"
