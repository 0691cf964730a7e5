"""Crafter's action keymap: which MineStudio env-format keys perform which of Crafter's 17 actions.

The wire format stays MineStudio's action dict, so the same agent speaks to both simulators. The green agent's
embedded backend translates with these tables (green/sims/crafter/actions.py); the scripted Crafter player builds
its actions from them (`env_action_for`). Pure data: any layer may import it.
"""

from __future__ import annotations

from mcu_arms.contracts.wire import EnvAction, noop_action

# inventory + hotbar.N → Crafter's make_* recipes (pickaxes on 1-3, swords on 4-6).
CRAFT_RECIPES: dict[str, str] = {
    "hotbar.1": "make_wood_pickaxe",
    "hotbar.2": "make_stone_pickaxe",
    "hotbar.3": "make_iron_pickaxe",
    "hotbar.4": "make_wood_sword",
    "hotbar.5": "make_stone_sword",
    "hotbar.6": "make_iron_sword",
}
# hotbar.N without inventory selects what `use` places; the selection persists across steps.
PLACE_SELECTION: dict[str, str] = {
    "hotbar.1": "stone",
    "hotbar.2": "table",
    "hotbar.3": "furnace",
    "hotbar.4": "sapling",
}
# The Crafter action that places each selectable item.
PLACE_ACTIONS: dict[str, str] = {
    "stone": "place_stone",
    "table": "place_table",
    "furnace": "place_furnace",
    "sapling": "place_plant",
}
DEFAULT_SELECTED_ITEM = "stone"  # hotbar slot 1, as in Minecraft
# Movement keys in the order they win when several are pressed. Crafter's map is top-down: forward is up.
MOVE_KEYS: dict[str, str] = {
    "forward": "move_up",
    "back": "move_down",
    "left": "move_left",
    "right": "move_right",
}
ATTACK_ACTION = "do"  # attack: mine, chop, hit, drink, eat
SNEAK_ACTION = "sleep"
# Keys that never do anything on Crafter.
NO_EFFECT_KEYS: tuple[str, ...] = ("jump", "sprint", "drop", "hotbar.7", "hotbar.8", "hotbar.9")


def env_action_for(crafter_action: str) -> EnvAction:
    """The env action that performs `crafter_action` regardless of the current selection (for scripted players)."""
    action = noop_action()
    if crafter_action == "noop":
        return action
    for key, recipe in CRAFT_RECIPES.items():
        if recipe == crafter_action:
            action["inventory"] = 1
            action[key] = 1
            return action
    for key, item in PLACE_SELECTION.items():
        if PLACE_ACTIONS[item] == crafter_action:
            action[key] = 1
            action["use"] = 1
            return action
    for key, move in MOVE_KEYS.items():
        if move == crafter_action:
            action[key] = 1
            return action
    if crafter_action == ATTACK_ACTION:
        action["attack"] = 1
        return action
    if crafter_action == SNEAK_ACTION:
        action["sneak"] = 1
        return action
    raise ValueError(f"unknown Crafter action {crafter_action!r}")
