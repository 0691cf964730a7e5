"""Turn a purple agent's reply into the one action the simulator may receive.

Three formats arrive (see protocol.ActionPayload), and a fourth for simulators that take skills (a SkillRequest,
carried beside the noop); all are decoded here into an EnvAction that holds exactly the
20 BUTTON_KEYS (0/1) and `camera` as (pitch, yaw) degrees. Anything else an agent sends (`chat` runs server commands;
`mobs`, `voxels`, `pickItem` are privileged), inside the action or beside it at the top level, is dropped and
reported by key; a step names at most MAX_DROPPED_NAMES of them and counts the rest, so that a reply with 60,000
invented keys costs a line, not megabytes. A reply that cannot be used becomes a noop with its cause and a reason;
parsing never raises, because one bad turn must not end an evaluation.

The compact format is VPT's hierarchical joint action space, as MineStudio's `agent` action type uses it: one button
index over the product of mutually exclusive button groups plus a camera on/off meta action (8640 combinations, and
index 8640 for "inventory alone"), and one camera index over 11 x 11 mu-law bins of (pitch, yaw) (contracts/camera.py).
MineStudio policies emit both with batch and time dimensions (`[[[n]]]`); any depth of one-element lists is unwrapped.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mcu_arms.contracts.camera import (
    MAX_CAMERA_INDEX,
    NULL_CAMERA_INDEX,
    camera_index_degrees,
    degrees_to_camera_index,
)
from mcu_arms.contracts.errors import validation_summary
from mcu_arms.contracts.skills import SkillRequest
from mcu_arms.contracts.states import NoopCause
from mcu_arms.contracts.text import shown_text
from mcu_arms.contracts.wire import (
    ALLOWED_ACTION_KEYS,
    BUTTON_KEYS,
    CAMERA_KEY,
    CAMERA_LIMIT_DEGREES,
    CHAT_TAGS,
    MAX_SAY_CHARS,
    MAX_SAY_LINES,
    ActionPayload,
    EnvAction,
    noop_action,
)

ActionFormat = Literal["compact", "expanded", "env", "skill"]

# Replies longer than this are not parsed: no legitimate action is anywhere near it.
MAX_REPLY_CHARS = 1_000_000
# Dropped keys named per step (the rest are counted); and how long a dropped key's name may be.
MAX_DROPPED_NAMES = 16
MAX_KEY_NAME_CHARS = 64
# Every key an action payload may carry at its top level; any other (`chat`, `commands`, ...) is dropped and counted.
PAYLOAD_KEYS = frozenset(ActionPayload.model_fields)
# The keys each format reads; the others of PAYLOAD_KEYS beside it are dropped and counted too, unless null (a
# serialised ActionPayload carries every field, the unused ones as null).
_FORMAT_KEYS: dict[str, frozenset[str]] = {
    "env": PAYLOAD_KEYS - {"buttons", "camera", "skill"},
    "expanded": PAYLOAD_KEYS - {"action", "skill"},
    "compact": PAYLOAD_KEYS - {"action", "skill"},
    "skill": PAYLOAD_KEYS - {"buttons", "camera", "action"},
}

# VPT / MineStudio joint button space: groups in product order (the last group varies fastest); `None` = not pressed.
_BUTTON_GROUPS: tuple[tuple[str | None, ...], ...] = (
    (None, *(f"hotbar.{i}" for i in range(1, 10))),
    (None, "forward", "back"),
    (None, "left", "right"),
    (None, "sprint", "sneak"),
    (None, "use"),
    (None, "drop"),
    (None, "attack"),
    (None, "jump"),
    (None, CAMERA_KEY),  # the camera meta action: camera moves only when this is on
)
COMPACT_BUTTON_COMBINATIONS = math.prod(len(group) for group in _BUTTON_GROUPS)  # 8640
COMPACT_INVENTORY_INDEX = COMPACT_BUTTON_COMBINATIONS  # the extra "inventory alone" entry
COMPACT_BUTTON_MAX = COMPACT_INVENTORY_INDEX


class ParsedAction(BaseModel):
    """The outcome of parsing one reply: what reaches the simulator, and everything that was not used."""

    action: EnvAction
    applied: bool  # False: `action` is the noop and `noop_cause` says why
    format: ActionFormat | None = None
    noop_cause: NoopCause | None = None
    reason: str = ""
    dropped_keys: list[str] = Field(default_factory=list)  # at most MAX_DROPPED_NAMES names
    dropped_unnamed: int = 0  # further keys dropped on this step, counted without their names
    adjustments: list[str] = Field(default_factory=list)  # legal inputs the decoder had to override, e.g. camera
    agent_note: str | None = None  # the agent's own `reason` beside its action
    failure_cause: str | None = None  # the agent said it could not act (AgentFailure.cause): an infrastructure noop
    skill: SkillRequest | None = None  # a skill to carry out instead of `action` (the noop then), for simulators that
    # take skills (the task run refuses it for the others)
    say: list[str] = Field(default_factory=list)  # tagged chat lines (wire.CHAT_TAGS), for simulators that post them;
    # each refused line (untagged, one too many, not text) is a dropped key "say"


class _Invalid(Exception):
    """Internal: the reply is well-formed JSON but not a usable action."""


def noop_result(cause: NoopCause, reason: str, dropped_keys: list[str] | None = None) -> ParsedAction:
    """The noop applied when a turn produced no usable action."""
    return ParsedAction(
        action=noop_action(), applied=False, noop_cause=cause, reason=reason, dropped_keys=dropped_keys or []
    )


def decode_compact(button_index: int, camera_index: int) -> tuple[EnvAction, list[str]]:
    """Decode a compact (joint) agent action into an env action; also returns the adjustments made.

    As in MineStudio 1.1.6, the camera index only counts when the button index has the camera meta action on. Its
    mapping marks the meta action off only for the 8640 product combinations, never for the extra "inventory alone"
    index, so 8640 turns the camera by its index (8640 with camera 0 opens the inventory and turns (-10, -10)).
    """
    action = noop_action()
    adjustments: list[str] = []
    camera_on = False
    if button_index == COMPACT_INVENTORY_INDEX:
        action["inventory"] = 1
        camera_on = True
    else:
        remainder = button_index
        for group in reversed(_BUTTON_GROUPS):
            remainder, choice = divmod(remainder, len(group))
            pressed = group[choice]
            if pressed == CAMERA_KEY:
                camera_on = True
            elif pressed is not None:
                action[pressed] = 1
    if camera_on:
        action[CAMERA_KEY] = camera_index_degrees(camera_index)
    elif camera_index != NULL_CAMERA_INDEX:
        adjustments.append("camera_meta_off")
    return action, adjustments


def encode_compact(action: EnvAction) -> tuple[int, int]:
    """The compact (button index, camera index) MineStudio's agent mode makes of an env action (VPT's
    from_factored): forward+back and left+right pressed together mean neither; in the other groups the key later in
    the group wins (sneak over sprint, hotbar.9 over hotbar.1); inventory is alone (index 8640) and keeps the camera
    still; the camera meta action is on when the quantised camera moves."""
    camera_index = degrees_to_camera_index(*action[CAMERA_KEY])
    if action.get("inventory"):
        return COMPACT_INVENTORY_INDEX, NULL_CAMERA_INDEX
    button_index = 0
    for group in _BUTTON_GROUPS:
        if group[-1] == CAMERA_KEY:
            choice = int(camera_index != NULL_CAMERA_INDEX)
        else:
            pressed = [position for position, key in enumerate(group) if key is not None and action.get(key)]
            cancelling = len(group) == 3 and group[1:] in (("forward", "back"), ("left", "right"))
            choice = 0 if not pressed or (cancelling and len(pressed) == 2) else pressed[-1]
        button_index = button_index * len(group) + choice
    return button_index, camera_index


def through_agent_mode(action: EnvAction) -> tuple[EnvAction, list[str]]:
    """What MineStudio's agent action mode applies for an env action (upstream MCU-AgentBeats sends env and expanded
    actions this way), and the adjustments that made it differ from what was sent."""
    applied, _ = decode_compact(*encode_compact(action))
    adjustments: list[str] = []
    if tuple(applied[CAMERA_KEY]) != tuple(float(value) for value in action[CAMERA_KEY]):
        adjustments.append("camera_quantised" if not action.get("inventory") else "camera_inventory_exclusive")
    changed = {key for key in BUTTON_KEYS if int(bool(action.get(key))) != applied[key]}
    if changed & {"forward", "back", "left", "right"}:
        adjustments.append("opposite_keys_cancelled")
    if changed - {"forward", "back", "left", "right"}:
        adjustments.append("inventory_exclusive" if action.get("inventory") else "key_group_exclusive")
    return applied, adjustments


def parse_reply(text: str | None) -> ParsedAction:
    """Parse a purple agent's reply text (JSON ActionPayload) into the action to apply. Never raises."""
    if text is None or not text.strip():
        return noop_result("unparseable", "empty reply")
    if len(text) > MAX_REPLY_CHARS:
        return noop_result("unparseable", f"reply of {len(text)} characters exceeds {MAX_REPLY_CHARS}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        return noop_result("unparseable", f"not JSON: {error}; reply starts {text[:80]!r}")
    if not isinstance(data, dict):
        return noop_result("unparseable", f"reply is a JSON {type(data).__name__}, expected an object")
    return parse_payload(data)


def parse_payload(data: dict[str, Any]) -> ParsedAction:
    """Parse a decoded ActionPayload dict in any of the three formats. Never raises.

    An answer carrying a `failure` is the agent saying it could not act (a failed model turn, a crashed tool): the
    step is a `failed_turn` noop under the agent's own cause, whatever action came with it.
    """
    failure = data.get("failure")
    if isinstance(failure, dict) and isinstance(failure.get("cause"), str) and failure["cause"]:
        cause = shown_text(failure["cause"], 64)
        detail = shown_text(str(failure.get("detail") or ""), 500)
        parsed = noop_result("failed_turn", f"{cause}: {detail}" if detail else cause)
        parsed.failure_cause = cause
        return parsed
    try:
        parsed = _parse_payload(data)
    except _Invalid as invalid:
        is_action = data.get("type", "action") == "action"  # another payload's keys (an ack's) are not dropped keys
        unknown = [key for key in data if key not in PAYLOAD_KEYS] if is_action else []
        return _with_dropped(noop_result("invalid_action", str(invalid)), [*unknown, *_dropped_env_keys(data)])
    note = data.get("reason")
    if isinstance(note, str) and note:
        parsed.agent_note = shown_text(note, 500)
    parsed.say, refused = _say_lines(data.get("say"))
    used = _FORMAT_KEYS[parsed.format] if parsed.format else PAYLOAD_KEYS
    unused = [key for key, value in data.items() if key not in PAYLOAD_KEYS or (key not in used and value is not None)]
    unused += ["say"] * refused
    return _with_dropped(parsed, [*unused, *parsed.dropped_keys])


def _say_lines(lines: Any) -> tuple[list[str], int]:
    """The chat lines to post: text lines that start with a source tag (never a command), at most MAX_SAY_LINES of
    MAX_SAY_CHARS; and how many were refused."""
    if lines is None:
        return [], 0
    if not isinstance(lines, list):
        return [], 1
    kept = [shown_text(line, MAX_SAY_CHARS) for line in lines if isinstance(line, str) and line.startswith(CHAT_TAGS)]
    return kept[:MAX_SAY_LINES], len(lines) - len(kept[:MAX_SAY_LINES])


def _with_dropped(parsed: ParsedAction, keys: list[Any]) -> ParsedAction:
    """Every key dropped on this step: the first MAX_DROPPED_NAMES by name, the rest counted."""
    names = sorted(_key_name(key) for key in keys)
    parsed.dropped_keys = names[:MAX_DROPPED_NAMES]
    parsed.dropped_unnamed = len(names) - len(parsed.dropped_keys)
    return parsed


def _dropped_env_keys(data: dict[str, Any]) -> list[Any]:
    """Keys an invalid env action carried that would have been dropped: counted even when the step is a noop."""
    inner = data.get("action")
    if not isinstance(inner, dict):
        return []
    return [key for key in inner if key not in ALLOWED_ACTION_KEYS]


def _parse_payload(data: dict[str, Any]) -> ParsedAction:
    payload_type = data.get("type", "action")
    if payload_type != "action":
        said = f" (agent said: {_short(data['message'])})" if "message" in data else ""
        raise _Invalid(f"payload type {_short(payload_type)} is not 'action'{said}")
    action_type = data.get("action_type")
    if action_type is None:
        action_type = "env" if "action" in data else "agent"
    if action_type == "env":
        return _parse_env(data.get("action"))
    if action_type == "agent":
        return _parse_agent(data.get("buttons"), data.get("camera"))
    if action_type == "skill":
        return _parse_skill(data.get("skill"))
    raise _Invalid(f"action_type {_short(action_type)} is not 'agent', 'env' or 'skill'")


def _parse_skill(inner: Any) -> ParsedAction:
    if not isinstance(inner, dict):
        raise _Invalid(f"a skill action needs skill = {{kind, args}}, got {_type_name(inner)}")
    try:
        skill = SkillRequest.model_validate(inner)
    except ValidationError as error:
        raise _Invalid(f"not a skill request: {validation_summary(error, limit=2)}") from None
    return ParsedAction(action=noop_action(), applied=True, format="skill", skill=skill)


def _parse_env(inner: Any) -> ParsedAction:
    if not isinstance(inner, dict):
        raise _Invalid(f"env action must be an object of button keys and camera, got {_type_name(inner)}")
    action = noop_action()
    dropped: list[str] = []
    for key, value in inner.items():
        if key not in ALLOWED_ACTION_KEYS:
            dropped.append(key)
        elif key == CAMERA_KEY:
            action[CAMERA_KEY] = _camera_degrees(value)
        else:
            action[key] = _button_value(key, value)
    return ParsedAction(action=action, applied=True, format="env", dropped_keys=dropped)


def _parse_agent(buttons: Any, camera: Any) -> ParsedAction:
    if buttons is None or camera is None:
        raise _Invalid("agent action needs both 'buttons' and 'camera'")
    button_list = _as_list("buttons", buttons)
    if len(button_list) == len(BUTTON_KEYS):
        action = noop_action()
        for key, value in zip(BUTTON_KEYS, button_list, strict=True):
            action[key] = _button_value(key, value)
        action[CAMERA_KEY] = _camera_degrees(camera)
        return ParsedAction(action=action, applied=True, format="expanded")
    if len(button_list) == 1:
        button_index = _index("buttons", _single(button_list), COMPACT_BUTTON_MAX)
        camera_index = _index("camera", _single(_as_list("camera", camera)), MAX_CAMERA_INDEX)
        action, adjustments = decode_compact(button_index, camera_index)
        return ParsedAction(action=action, applied=True, format="compact", adjustments=adjustments)
    raise _Invalid(
        f"buttons has {len(button_list)} entries: expected 1 (compact index) or {len(BUTTON_KEYS)} (expanded)"
    )


def _as_list(name: str, value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if _is_number(value):
        return [value]
    raise _Invalid(f"{name} must be a list, got {_type_name(value)}")


def _single(value: Any) -> Any:
    """Unwrap one-element lists to any depth ([[[123]]] is how batched, time-stepped policies emit one index)."""
    while isinstance(value, list):
        if len(value) != 1:
            raise _Invalid(f"expected a single index, got a list of {len(value)}")
        value = value[0]
    return value


def _index(name: str, value: Any, maximum: int) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)  # integers sent through a data part arrive as floats
    if not _is_number(value) or isinstance(value, float):
        raise _Invalid(f"{name} index must be an integer, got {_short(value)}")
    index = int(value)
    if not 0 <= index <= maximum:
        raise _Invalid(f"{name} index {index} outside 0..{maximum}")
    return index


def _button_value(key: str, value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if _is_number(value) and value in (0, 1):
        return int(value)
    raise _Invalid(f"button '{key}' must be 0, 1 or a boolean, got {_short(value)}")


def _camera_degrees(value: Any) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise _Invalid(f"camera must be [pitch, yaw] in degrees, got {_short(value)}")
    degrees = []
    for axis, component in zip(("pitch", "yaw"), value, strict=True):
        if not _is_number(component) or not _is_finite(component):
            raise _Invalid(f"camera {axis} must be a finite number, got {_short(component)}")
        if abs(component) > CAMERA_LIMIT_DEGREES:
            raise _Invalid(f"camera {axis} {component} outside -{CAMERA_LIMIT_DEGREES:g}..{CAMERA_LIMIT_DEGREES:g}")
        degrees.append(float(component))
    return degrees[0], degrees[1]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: int | float) -> bool:
    return isinstance(value, int) or math.isfinite(value)


def _key_name(key: Any) -> str:
    """A dropped key as it is counted: bounded and neutralised, so a hostile agent can neither bloat the result with
    huge keys nor reach the terminal with escape sequences through them."""
    return shown_text(key if isinstance(key, str) else repr(key), MAX_KEY_NAME_CHARS)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any) -> str:
    return shown_text(repr(value), 80)
