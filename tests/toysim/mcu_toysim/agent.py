"""A toy agent registered through the `mcu_arms.agents` entry point by its descriptor: it presses one button at every
step, the one its own options table ([agent_options] swing) names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from mcu_arms.api import (
    AckPayload,
    ActionPayload,
    AgentDescriptor,
    InitPayload,
    ObservationPayload,
    Policy,
    PurpleOptions,
    env_action,
)


class AttackerOptions(BaseModel):
    """[agent_options] of an arm with agent = "toy_attacker"."""

    model_config = ConfigDict(extra="forbid")

    swing: Literal["attack", "use"] = "attack"


class AttackingPolicy(Policy):
    def __init__(self, swing: str) -> None:
        self.swing = swing

    async def init(self, payload: InitPayload) -> AckPayload:
        return AckPayload(message=f"toy attacker ready, pressing {self.swing}")

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        return ActionPayload(action_type="env", action=env_action(self.swing))


def make_policy(options: PurpleOptions) -> Policy:
    return AttackingPolicy(options.table(AttackerOptions).swing)


TOY_ATTACKER = AgentDescriptor("toy_attacker", "mcu_toysim.agent:make_policy", table=AttackerOptions)
