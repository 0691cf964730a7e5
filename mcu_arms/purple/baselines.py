"""Baseline policies: the floor every arm is compared against.

Both answer in the env format (MineStudio's action dict). RandomPolicy presses one key at a time, uniformly over every
button and four camera turns: an agent that knows nothing of the game, not even that crafting is a chord of two keys.
"""

from __future__ import annotations

import random

from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import (
    BUTTON_KEYS,
    CAMERA_KEY,
    AckPayload,
    ActionPayload,
    InitPayload,
    ObservationPayload,
)
from mcu_arms.purple.base import Policy

CAMERA_TURN_DEGREES = 15.0


def env_action(*pressed: str, camera: tuple[float, float] = (0.0, 0.0)) -> dict[str, object]:
    """A full env-format action: every button key present, the named ones pressed, camera as [pitch, yaw]."""
    unknown = set(pressed) - set(BUTTON_KEYS)
    if unknown:
        raise ValueError(f"not button keys: {sorted(unknown)}")
    action: dict[str, object] = {key: int(key in pressed) for key in BUTTON_KEYS}
    action[CAMERA_KEY] = [camera[0], camera[1]]
    return action


def _random_repertoire() -> tuple[dict[str, object], ...]:
    presses = [env_action(key) for key in BUTTON_KEYS]
    turns = [
        env_action(camera=(0.0, CAMERA_TURN_DEGREES)),
        env_action(camera=(0.0, -CAMERA_TURN_DEGREES)),
        env_action(camera=(CAMERA_TURN_DEGREES, 0.0)),
        env_action(camera=(-CAMERA_TURN_DEGREES, 0.0)),
    ]
    return tuple(presses + turns)


RANDOM_REPERTOIRE = _random_repertoire()


class NoopPolicy(Policy):
    """Presses nothing, ever: what an agent scores by standing still."""

    async def init(self, payload: InitPayload) -> AckPayload:
        return AckPayload(message="noop baseline ready")

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        return ActionPayload(action_type="env", action=env_action())


class RandomPolicy(Policy):
    """Uniform over RANDOM_REPERTOIRE; reseeded on every init, so an episode's actions depend only on the seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    async def init(self, payload: InitPayload) -> AckPayload:
        self._rng = random.Random(self.seed)
        return AckPayload(message=f"random baseline ready (seed {self.seed})")

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        return ActionPayload(action_type="env", action=dict(self._rng.choice(RANDOM_REPERTOIRE)))


def make_noop(options: PurpleOptions) -> Policy:
    return NoopPolicy()


def make_random(options: PurpleOptions) -> Policy:
    return RandomPolicy(seed=options.seed)
