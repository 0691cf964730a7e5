"""Agent action mode, as upstream's green applies every env and expanded action (MineStudio's compact joint space):
what `through_agent_mode` makes of an action, the adjustments it names, that compact actions are a fixed point, and
that the stand-in's own reading of 1.1.6's from_factored (tests/fake_minestudio) agrees on random actions."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from mcu_arms.contracts.camera import SURVIVING_DEGREES
from mcu_arms.contracts.wire import BUTTON_KEYS, noop_action
from mcu_arms.green.actions import COMPACT_BUTTON_COMBINATIONS, decode_compact, encode_compact, through_agent_mode


def _action(**pressed: Any) -> dict[str, Any]:
    action = noop_action()
    for key, value in pressed.items():
        action[key.replace("_", ".")] = value
    return action


@pytest.mark.parametrize(
    ("sent", "expected", "adjustments"),
    [
        (_action(camera=(4.32, 0.25)), _action(camera=(SURVIVING_DEGREES[8], 0.0)), ["camera_quantised"]),
        (_action(camera=(-90.0, 20.0)), _action(camera=(-10.0, 10.0)), ["camera_quantised"]),
        (_action(forward=1, back=1, left=1), _action(left=1), ["opposite_keys_cancelled"]),
        (_action(sprint=1, sneak=1, hotbar_1=1, hotbar_7=1), _action(sneak=1, hotbar_7=1), ["key_group_exclusive"]),
        (
            _action(inventory=1, attack=1, camera=(5.0, 5.0)),
            _action(inventory=1),
            ["camera_inventory_exclusive", "inventory_exclusive"],
        ),
        (
            _action(forward=1, jump=1, attack=1, camera=(SURVIVING_DEGREES[3], 10.0)),
            _action(forward=1, jump=1, attack=1, camera=(SURVIVING_DEGREES[3], 10.0)),
            [],
        ),
    ],
)
def test_what_agent_mode_applies_and_the_adjustments_it_names(sent, expected, adjustments) -> None:
    applied, named = through_agent_mode(sent)
    assert {key: applied[key] for key in BUTTON_KEYS} == {key: expected[key] for key in BUTTON_KEYS}
    assert applied["camera"] == pytest.approx(expected["camera"])
    assert named == adjustments


@pytest.mark.slow
def test_every_compact_action_is_a_fixed_point() -> None:
    """Decoding a compact action and sending it through agent mode again changes nothing (the camera meta action
    off with a moving camera index decodes to no turn, which encodes back to the same button index)."""
    for button in range(COMPACT_BUTTON_COMBINATIONS):
        for camera in (0, 60, 77, 120):
            decoded, _ = decode_compact(button, camera)
            assert through_agent_mode(decoded) == (decoded, []), (button, camera)


@pytest.mark.slow
def test_the_stand_ins_from_factored_agrees_on_random_actions(fake_minestudio: Any) -> None:
    from minestudio.simulator.entry import MinecraftSim

    sim = MinecraftSim(action_type="agent")
    rng = random.Random(11)
    for _ in range(2000):
        action = _action(
            camera=(rng.uniform(-30, 30), rng.choice([0.0, rng.uniform(-30, 30)])),
            **{key.replace(".", "_"): int(rng.random() < 0.15) for key in BUTTON_KEYS},
        )
        batched = {key: np.array([value]) for key, value in action.items() if key != "camera"}
        batched["camera"] = np.array([action["camera"]])
        theirs = sim.env_action_to_agent_action(batched)
        assert encode_compact(action) == (int(theirs["buttons"][0, 0]), int(theirs["camera"][0, 0])), action
