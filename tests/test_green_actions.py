"""The action decoder: the three formats, VPT's compact encoding, and what never reaches the simulator."""

from __future__ import annotations

import itertools
import json

import pytest

from mcu_arms.contracts.camera import NULL_CAMERA_INDEX as COMPACT_CAMERA_NULL
from mcu_arms.contracts.wire import BUTTON_KEYS, noop_action
from mcu_arms.green.actions import COMPACT_INVENTORY_INDEX, decode_compact, parse_payload, parse_reply

# VPT's joint button space, rebuilt independently the way VPT builds it (itertools.product over the groups).
_GROUPS = [
    ["none"] + [f"hotbar.{i}" for i in range(1, 10)],
    ["none", "forward", "back"],
    ["none", "left", "right"],
    ["none", "sprint", "sneak"],
    ["none", "use"],
    ["none", "drop"],
    ["none", "attack"],
    ["none", "jump"],
    ["none", "camera"],
]
_COMBINATIONS = list(itertools.product(*_GROUPS))


def test_compact_button_space_matches_vpt_product_order():
    assert len(_COMBINATIONS) == COMPACT_INVENTORY_INDEX == 8640
    for index in range(0, len(_COMBINATIONS), 7):
        combination = _COMBINATIONS[index]
        action, _ = decode_compact(index, COMPACT_CAMERA_NULL)
        pressed = {key for key in BUTTON_KEYS if action[key]}
        assert pressed == {choice for choice in combination if choice not in ("none", "camera")}


@pytest.mark.parametrize(
    ("camera_index", "camera"),
    [(0, (-10.0, -10.0)), (60, (0.0, 0.0)), (120, (10.0, 10.0)), (10, (-10.0, 10.0))],
)
def test_compact_inventory_index_turns_the_camera_as_minestudio_does(camera_index, camera):
    """Measured on MineStudio 1.1.6's own CameraHierarchicalMapping + ActionTransformer: its camera-meta-off table
    covers only the 8640 product combinations, so 8640 (inventory) keeps the camera index."""
    action, adjustments = decode_compact(COMPACT_INVENTORY_INDEX, camera_index)
    assert {key for key in BUTTON_KEYS if action[key]} == {"inventory"}
    assert action["camera"] == pytest.approx(camera)
    assert adjustments == []


def test_compact_camera_decodes_to_the_values_measured_on_minestudio():
    measured = [-10, -5.8095, -3.2154, -1.6095, -0.6154, 0, 0.6154, 1.6095, 3.2154, 5.8095, 10]
    camera_on = _COMBINATIONS.index(("none",) * 8 + ("camera",))
    for pitch_bin, pitch in enumerate(measured):
        yaw_bin = 10 - pitch_bin
        action, _ = decode_compact(camera_on, pitch_bin * 11 + yaw_bin)
        assert action["camera"] == pytest.approx((pitch, measured[yaw_bin]), abs=1e-4)


def test_compact_camera_is_pitch_major_and_needs_the_meta_action():
    camera_on = _COMBINATIONS.index(("none",) * 8 + ("camera",))
    action, adjustments = decode_compact(camera_on, 0 * 11 + 10)  # pitch bin 0, yaw bin 10
    assert action["camera"] == pytest.approx((-10.0, 10.0))
    assert adjustments == []
    action, adjustments = decode_compact(0, 0 * 11 + 10)  # meta off: camera ignored, and said so
    assert action["camera"] == (0.0, 0.0)
    assert adjustments == ["camera_meta_off"]


def test_compact_noop_is_the_noop():
    parsed = parse_reply(json.dumps({"type": "action", "action_type": "agent", "buttons": [0], "camera": [60]}))
    assert parsed.applied and parsed.format == "compact"
    assert parsed.action == noop_action()


@pytest.mark.parametrize(
    ("buttons", "camera"),
    [
        ([123], [61]),
        ([123.0], [61.0]),
        ([[123]], [[61]]),
        ([[[123]]], [[[61]]]),
        ([[[[[123.0]]]]], [[[[61]]]]),
        (123, 61),
        ([[[123]]], 61),
    ],
)
def test_compact_accepts_the_shapes_policies_emit(buttons, camera):
    parsed = parse_payload({"action_type": "agent", "buttons": buttons, "camera": camera})
    assert parsed.applied, parsed.reason
    assert parsed.action == decode_compact(123, 61)[0]


@pytest.mark.parametrize(
    ("buttons", "camera", "fragment"),
    [
        ([8641], [60], "outside 0..8640"),
        ([-1], [60], "outside 0..8640"),
        ([0], [121], "outside 0..120"),
        ([1.5], [60], "must be an integer"),
        ([True], [60], "must be an integer"),
        (["3"], [60], "must be an integer"),
        ([0, 1], [60], "buttons has 2 entries"),
        ([0], [1, 2], "single index"),
        ([[[0, 1]]], [60], "single index"),
        ([[[0]]], [[[60, 61]]], "single index"),
        ([[[]]], [60], "single index"),
        ([0], None, "needs both"),
    ],
)
def test_compact_rejects_bad_indices_with_a_reason(buttons, camera, fragment):
    parsed = parse_payload({"action_type": "agent", "buttons": buttons, "camera": camera})
    assert not parsed.applied
    assert parsed.noop_cause == "invalid_action"
    assert fragment in parsed.reason
    assert parsed.action == noop_action()


def test_expanded_format_maps_buttons_in_button_keys_order():
    buttons = [0] * 20
    buttons[BUTTON_KEYS.index("forward")] = 1
    buttons[BUTTON_KEYS.index("hotbar.9")] = True
    parsed = parse_payload({"action_type": "agent", "buttons": buttons, "camera": [4.32, -90]})
    assert parsed.applied and parsed.format == "expanded"
    assert {key for key in BUTTON_KEYS if parsed.action[key]} == {"forward", "hotbar.9"}
    assert parsed.action["camera"] == (4.32, -90.0)  # degrees pass through unquantised, as in env mode


@pytest.mark.parametrize(
    ("camera", "fragment"),
    [
        ([float("nan"), 0], "finite"),
        ([0, float("inf")], "finite"),
        ([181, 0], "outside"),
        ([0, -180.5], "outside"),
        ([1], "[pitch, yaw]"),
        ([1, 2, 3], "[pitch, yaw]"),
        ("left", "[pitch, yaw]"),
        ([None, 0], "finite"),
    ],
)
def test_bad_camera_is_rejected(camera, fragment):
    parsed = parse_payload({"action_type": "agent", "buttons": [0] * 20, "camera": camera})
    assert parsed.noop_cause == "invalid_action"
    assert fragment in parsed.reason


def test_env_format_drops_privileged_and_unknown_keys_but_applies_the_rest():
    reply = {
        "type": "action",
        "action_type": "env",
        "action": {
            "forward": 1,
            "attack": True,
            "chat": "/give @s diamond",
            "mobs": [],
            "voxels": {},
            "pickItem": 1,
            "fly": 1,
            "camera": [0.0, 15.0],
        },
    }
    parsed = parse_reply(json.dumps(reply))
    assert parsed.applied and parsed.format == "env"
    assert parsed.dropped_keys == ["chat", "fly", "mobs", "pickItem", "voxels"]
    assert set(parsed.action) == set(BUTTON_KEYS) | {"camera"}
    assert parsed.action["forward"] == 1 and parsed.action["attack"] == 1
    assert parsed.action["camera"] == (0.0, 15.0)


def test_env_format_missing_keys_default_to_released():
    parsed = parse_payload({"action_type": "env", "action": {"jump": 1}})
    assert parsed.applied
    assert parsed.action == {**noop_action(), "jump": 1}


@pytest.mark.parametrize("value", [2, -1, 0.5, "1", None, [1]])
def test_env_button_values_must_be_binary(value):
    parsed = parse_payload({"action_type": "env", "action": {"use": value, "chat": "x"}})
    assert parsed.noop_cause == "invalid_action"
    assert "button 'use'" in parsed.reason
    assert parsed.dropped_keys == ["chat"]  # still counted: the agent did send it


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("", "unparseable"),
        (None, "unparseable"),
        ("not json at all", "unparseable"),
        ("[1, 2]", "unparseable"),
        ('{"type": "ack", "success": true}', "invalid_action"),
        ('{"action_type": "mouse"}', "invalid_action"),
        ('{"action_type": "env", "action": [1]}', "invalid_action"),
        ("[" * 100000, "unparseable"),
    ],
)
def test_unusable_replies_become_a_noop_with_a_cause(text, cause):
    parsed = parse_reply(text)
    assert not parsed.applied
    assert parsed.noop_cause == cause
    assert parsed.reason
    assert parsed.action == noop_action()


def test_format_is_inferred_when_action_type_is_missing():
    assert parse_payload({"action": {"forward": 1}}).format == "env"
    assert parse_payload({"buttons": [0], "camera": [60]}).format == "compact"


def test_a_skill_action_is_read_and_a_key_beside_it_that_it_does_not_use_is_dropped():
    skill = {"kind": "collect", "args": {"block": "oak_log", "count": 2.0}}
    parsed = parse_payload({"type": "action", "action_type": "skill", "skill": skill, "action": {"forward": 1}})
    assert parsed.format == "skill" and parsed.skill.kind == "collect" and parsed.skill.args["count"] == 2
    assert parsed.action == noop_action() and parsed.dropped_keys == ["action"]
    env = parse_payload({"type": "action", "action_type": "env", "action": {"forward": 1}, "skill": skill})
    assert env.skill is None and env.dropped_keys == ["skill"], "a skill rides only on action_type skill"
    wrong = parse_payload({"type": "action", "action_type": "skill", "skill": {"kind": "teleport"}})
    assert wrong.noop_cause == "invalid_action" and "not a skill request" in wrong.reason
