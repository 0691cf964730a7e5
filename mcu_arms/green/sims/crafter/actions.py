"""How a MineStudio env-format action becomes one of Crafter's 17 discrete actions.

The wire format stays MineStudio's action dict, so the same agent speaks to both simulators. Crafter has no camera,
no jumping and no free inventory, so the mapping below is an honest approximation: every key that could not take
effect is counted (see `ActionAdapter.counts`) and reported with the results, never silently ignored.

The tables live in contracts/crafter_keymap.py, shared with the scripted Crafter player.
"""

from __future__ import annotations

from collections import Counter

from mcu_arms.contracts.crafter_keymap import (
    ATTACK_ACTION,
    CRAFT_RECIPES,
    DEFAULT_SELECTED_ITEM,
    MOVE_KEYS,
    NO_EFFECT_KEYS,
    PLACE_ACTIONS,
    PLACE_SELECTION,
    SNEAK_ACTION,
)
from mcu_arms.contracts.wire import BUTTON_KEYS, CAMERA_KEY, EnvAction


def _pressed(action: EnvAction, key: str) -> bool:
    return bool(action.get(key, 0))


def _camera_moved(action: EnvAction) -> bool:
    camera = action.get(CAMERA_KEY, (0.0, 0.0))
    return any(float(value) != 0.0 for value in camera)


class ActionAdapter:
    """Translates env actions one step at a time, keeping the hotbar selection and counting keys without effect.

    Precedence when several keys are pressed: craft (inventory+hotbar.1-6) > use > attack > sneak > move.
    A hotbar.1-4 press without inventory updates the selection first, so hotbar.2+use places a table in one step.
    Counts: "no_effect.<key>" for keys with no Crafter meaning in that combination, "overridden.<key>" for keys
    that lost to a higher-precedence key in the same step.
    """

    def __init__(self) -> None:
        self.selected_item = DEFAULT_SELECTED_ITEM
        self.counts: Counter[str] = Counter()
        self.last_no_effect: list[str] = []  # the inputs of the latest translated action that had no effect

    def reset(self) -> None:
        self.selected_item = DEFAULT_SELECTED_ITEM
        self.counts.clear()

    def translate(self, action: EnvAction) -> str:
        """Return the Crafter action name for this env action (e.g. "move_up", "noop")."""
        self.last_no_effect = []
        pressed = [key for key in BUTTON_KEYS if _pressed(action, key)]
        if _camera_moved(action):
            self._no_effect("camera")
        for key in NO_EFFECT_KEYS:
            if key in pressed:
                self._no_effect(key)
        hotbars = [key for key in pressed if key in CRAFT_RECIPES]
        candidates: list[tuple[str, str]] = []  # (key that triggers it, crafter action), highest precedence first
        if "inventory" in pressed:
            if hotbars:
                candidates.append((hotbars[0], CRAFT_RECIPES[hotbars[0]]))
                self._count_overridden(hotbars[1:])
            else:
                self._no_effect("inventory")
        else:
            selectable = [key for key in hotbars if key in PLACE_SELECTION]
            if selectable:
                self.selected_item = PLACE_SELECTION[selectable[0]]
                self._count_overridden(selectable[1:])
            for key in hotbars:
                if key not in PLACE_SELECTION:
                    self._no_effect(key)
        if "use" in pressed:
            candidates.append(("use", PLACE_ACTIONS[self.selected_item]))
        if "attack" in pressed:
            candidates.append(("attack", ATTACK_ACTION))
        if "sneak" in pressed:
            candidates.append(("sneak", SNEAK_ACTION))
        candidates.extend((key, crafter_action) for key, crafter_action in MOVE_KEYS.items() if key in pressed)
        if not candidates:
            return "noop"
        self._count_overridden([key for key, _ in candidates[1:]])
        return candidates[0][1]

    def _no_effect(self, key: str) -> None:
        self.counts[f"no_effect.{key}"] += 1
        self.last_no_effect.append(key)

    def _count_overridden(self, keys: list[str]) -> None:
        for key in keys:
            self.counts[f"overridden.{key}"] += 1


AGENT_INSTRUCTIONS = """\
This simulator is Crafter, a 2-D top-down analogue of Minecraft (a Crafter analogue of MCU, not Minecraft itself).
Each 128x128 frame shows a 9x7 tile map centred on you, with your inventory in the two rows below it.
Your env action keys act as follows (one Crafter action per step):
- forward / back / left / right: move (and face) up / down / left / right on the map.
- attack: interact with the tile you face: chop a tree (wood), mine stone/coal/iron/diamond (needs the right
  pickaxe), hit a zombie/skeleton/cow, drink water.
- use: place the selected item on the tile you face. hotbar.1 selects stone, hotbar.2 a crafting table (costs wood),
  hotbar.3 a furnace (costs stone), hotbar.4 a sapling. The selection persists; hotbar.N together with use places it
  at once.
- inventory + hotbar.1..6 (pressed together): craft, near a table (iron tools also need a furnace):
  1 wood pickaxe, 2 stone pickaxe, 3 iron pickaxe, 4 wood sword, 5 stone sword, 6 iron sword.
- sneak: sleep (restores energy; wakes when rested or hurt).
- Precedence when several keys are pressed: craft > use > attack > sneak > move.
- camera, jump, sprint, drop and hotbar.7-9 have no effect here; they are counted and reported.
Crafting a table/furnace counts as crafting it; dying respawns you near the start with an empty inventory."""
