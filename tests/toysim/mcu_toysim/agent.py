"""A toy agent registered through the `mcu_arms.agents` entry point: it attacks at every step."""

from __future__ import annotations

from mcu_arms.api import AckPayload, ActionPayload, InitPayload, ObservationPayload, Policy, PurpleOptions, env_action


class AttackingPolicy(Policy):
    async def init(self, payload: InitPayload) -> AckPayload:
        return AckPayload(message="toy attacker ready")

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        return ActionPayload(action_type="env", action=env_action("attack"))


def make_policy(options: PurpleOptions) -> Policy:
    return AttackingPolicy()
