"""Thousands of random and malformed replies through the action decoder: it never raises, and nothing but the
button keys and camera (with legal values) ever comes out of it."""

from __future__ import annotations

import json
import math
import random
from typing import Any

from mcu_arms.contracts.wire import ALLOWED_ACTION_KEYS, BUTTON_KEYS, noop_action
from mcu_arms.green.actions import parse_payload, parse_reply

ITERATIONS = 6000
_ODD_KEYS = ["chat", "mobs", "voxels", "pickItem", "camera", "forward", "hotbar.0", "", "ATTACK", "x" * 200]


def _random_scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            0,
            1,
            -1,
            2,
            8640,
            8641,
            60,
            120,
            121,
            10**30,
            -(10**30),
            0.5,
            1.0,
            -0.0,
            179.9,
            180.0,
            180.01,
            1e308,
            float("nan"),
            float("inf"),
            float("-inf"),
            True,
            False,
            None,
            "",
            "1",
            "forward",
            "/kill @a",
            rng.randint(-20000, 20000),
            rng.uniform(-400, 400),
        ]
    )


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.55:
        return _random_scalar(rng)
    if roll < 0.8:
        return [_random_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 20, 21]))]
    return {rng.choice(_ODD_KEYS + list(BUTTON_KEYS)): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def _mutated_valid(rng: random.Random) -> dict[str, Any]:
    """Start from a valid payload of a random format, then break one part of it."""
    kind = rng.choice(["compact", "expanded", "env"])
    if kind == "compact":
        payload: dict[str, Any] = {
            "type": "action",
            "action_type": "agent",
            "buttons": [rng.randint(0, 8640)],
            "camera": [rng.randint(0, 120)],
        }
    elif kind == "expanded":
        payload = {
            "type": "action",
            "action_type": "agent",
            "buttons": [rng.randint(0, 1) for _ in range(20)],
            "camera": [rng.uniform(-180, 180), rng.uniform(-180, 180)],
        }
    else:
        inner: dict[str, Any] = {key: rng.randint(0, 1) for key in rng.sample(BUTTON_KEYS, rng.randint(0, 20))}
        inner["camera"] = [rng.uniform(-180, 180), rng.uniform(-180, 180)]
        payload = {"type": "action", "action_type": "env", "action": inner}
    for _ in range(rng.randint(0, 3)):
        target = payload.get("action") if isinstance(payload.get("action"), dict) and rng.random() < 0.6 else payload
        key = rng.choice(list(target) + _ODD_KEYS + ["type", "action_type", "buttons"])
        target[key] = _random_value(rng)
    return payload


def _random_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return json.dumps(_mutated_valid(rng))
    if roll < 0.7:
        return json.dumps(_random_value(rng))
    if roll < 0.85:
        text = json.dumps(_mutated_valid(rng))
        cut = rng.randint(0, len(text))
        return text[:cut] + "".join(rng.choice('{}[],:"0x\\') for _ in range(rng.randint(0, 5))) + text[cut:]
    return "".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 40)))


def _assert_safe(parsed, payload: object = None) -> None:
    action = parsed.action
    assert set(action) == ALLOWED_ACTION_KEYS
    for key in BUTTON_KEYS:
        assert type(action[key]) is int and action[key] in (0, 1)
    camera = action["camera"]
    assert isinstance(camera, tuple) and len(camera) == 2
    assert all(type(c) is float and math.isfinite(c) and abs(c) <= 180 for c in camera)
    if parsed.applied:
        assert parsed.noop_cause is None
    else:
        assert parsed.noop_cause in ("unparseable", "invalid_action") and parsed.reason
        assert action == noop_action()
    # An action key is dropped only where it does not belong: beside the action, at the payload's top level.
    top_level = set(payload) if isinstance(payload, dict) else set()
    assert all(key not in ALLOWED_ACTION_KEYS or key in top_level for key in parsed.dropped_keys)
    assert all(len(key) <= 64 + len("...[1000000 more chars]") and key.isprintable() for key in parsed.dropped_keys)


def test_random_and_malformed_replies_never_raise_and_stay_whitelisted():
    rng = random.Random(20261130)
    outcomes = {"applied": 0, "unparseable": 0, "invalid_action": 0}
    dropped_seen: set[str] = set()
    for _ in range(ITERATIONS):
        text = _random_text(rng)
        parsed = parse_reply(text)
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        _assert_safe(parsed, payload)
        outcomes["applied" if parsed.applied else parsed.noop_cause] += 1
        dropped_seen.update(parsed.dropped_keys)
    # The generator must really exercise every branch, or the test proves nothing.
    assert all(count > ITERATIONS // 20 for count in outcomes.values()), outcomes
    assert {"chat", "mobs", "voxels", "pickItem"} <= dropped_seen


def test_random_python_objects_through_parse_payload():
    rng = random.Random(7)
    for _ in range(ITERATIONS // 2):
        payload = (
            _mutated_valid(rng)
            if rng.random() < 0.5
            else {"action": _random_value(rng), "buttons": _random_value(rng), "camera": _random_value(rng)}
        )
        _assert_safe(parse_payload(payload), payload)
