"""The embedded simulator: MCU tasks on Crafter, so an arm runs end to end on any machine.

Results are a Crafter analogue of MCU and always labelled so. Crafter's achievements are translated into
MineStudio-style cumulative counters (`ACHIEVEMENT_COUNTERS`), so MCU reward entries score unchanged; entries with no
analogue are reported as unavailable by identity. Crafter is imported only when a simulator is constructed, so
`supports()` and the tables stay cheap for planning.
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from mcu_arms.contracts.preflight import HostCheck
from mcu_arms.contracts.support import ACHIEVEMENT_COUNTERS, TaskSupport, embedded_support
from mcu_arms.green.sims.base import SimStep, Simulator
from mcu_arms.green.sims.crafter.actions import AGENT_INSTRUCTIONS, ActionAdapter

if TYPE_CHECKING:
    import numpy as np

    from mcu_arms.contracts.catalog import ResetMode
    from mcu_arms.contracts.game_state import GameState
    from mcu_arms.contracts.tasks import TaskSpec
    from mcu_arms.contracts.wire import EnvAction

FRAME_SIZE = 128
INVENTORY_CAP = 9  # Crafter caps every inventory counter at 9
VITALS = ("health", "food", "drink", "energy")

# Minecraft items that /give (or a main-hand replaceitem) can grant, by their Crafter inventory analogue.
GIVE_ITEMS: dict[str, str] = {
    "cobblestone": "stone",
    "stone": "stone",
    "iron_ingot": "iron",
    "coal": "coal",
    "diamond": "diamond",
    "oak_sapling": "sapling",
    "wooden_pickaxe": "wood_pickaxe",
    "stone_pickaxe": "stone_pickaxe",
    "iron_pickaxe": "iron_pickaxe",
    "wooden_sword": "wood_sword",
    "stone_sword": "stone_sword",
    "iron_sword": "iron_sword",
}
WOOD_ITEM_SUFFIXES = ("_log", "_planks")
WOOD_KINDS = ("oak", "birch", "spruce", "jungle", "acacia", "dark_oak", "mangrove", "cherry")
# Minecraft items that Crafter places directly under its own name (no crafted item in between).
PLACED_BLOCKS: dict[str, str] = {"crafting_table": "table"}
SUMMONABLE = ("zombie", "skeleton", "cow")

_GIVE = re.compile(r"^/?give\s+@[sp]\s+(?:minecraft:)?([a-z_]+)(\{.*\})?(?:\s+(\d+))?\s*$")
_MAINHAND = re.compile(r"^/?replaceitem\s+entity\s+@[sp]\s+weapon\.mainhand\s+(?:minecraft:)?([a-z_]+)\s*(\d+)?\s*$")
_SUMMON = re.compile(r"^/?(?:execute\s+at\s+@[sp]\s+run\s+)?summon\s+(?:minecraft:)?([a-z_]+)(?:\s.*)?$")


def crafter_item_for(minecraft_item: str) -> str | None:
    """The Crafter inventory item standing in for a Minecraft item, or None when there is none."""
    if minecraft_item in GIVE_ITEMS:
        return GIVE_ITEMS[minecraft_item]
    if minecraft_item == "planks" or minecraft_item.endswith(WOOD_ITEM_SUFFIXES):
        return "wood"
    return None


def item_aliases() -> dict[str, str]:
    """Minecraft item names a plan may use, by the Crafter item standing in for each (the capability list's aliases)."""
    names = [*GIVE_ITEMS, "planks", *(f"{kind}{suffix}" for kind in WOOD_KINDS for suffix in WOOD_ITEM_SUFFIXES)]
    aliases = {name: item for name in names if (item := crafter_item_for(name)) is not None and item != name}
    return aliases | PLACED_BLOCKS


def crafter_version() -> str:
    return metadata.version("crafter")


def preflight(env: Mapping[str, str], arms: Mapping[str, BaseModel | None]) -> list[tuple[HostCheck, list[str]]]:
    """Crafter must be importable here (checked without importing it)."""
    found = importlib.util.find_spec("crafter") is not None
    check = HostCheck(
        name="crafter (embedded simulator)",
        status="ok" if found else "fail",
        detail="importable" if found else "pip install crafter==1.8.3",
    )
    return [(check, list(arms))]


class EmbeddedSimulator(Simulator):
    """MCU tasks on a reproducible Crafter world: 128x128 frames, MineStudio-style counters, endless episodes."""

    name = "embedded"
    warmed_up: ClassVar[bool] = False  # this process has built a world once (warm_up)

    def __init__(self) -> None:
        from mcu_arms.green.sims.crafter.state import CrafterStateReader, crafter_capabilities
        from mcu_arms.green.sims.crafter.world import ReproducibleCrafterEnv

        self._env = ReproducibleCrafterEnv(size=FRAME_SIZE)
        self._state_reader = CrafterStateReader(self._env, crafter_capabilities(item_aliases()))
        self._adapter = ActionAdapter()
        self._fallbacks: Counter[str] = Counter()
        self._counters: dict[str, dict[str, int]] = {}
        self._last_achievements: dict[str, int] = {}
        self._deaths = 0
        self._task: TaskSpec | None = None

    @classmethod
    def warm_up(cls) -> None:
        """Crafter and numpy imported, its textures read and a throwaway world built: what would otherwise fall
        between the first request and the first step. Each world draws from its own RNG, so this one changes nothing
        an episode plays. Once per process."""
        if not cls.warmed_up:
            cls()._env.reset_world(seed=0)
            cls.warmed_up = True

    def version(self) -> str:
        return crafter_version()

    def label(self) -> str:
        return f"embedded (Crafter {self.version()}): a Crafter analogue of MCU, not MCU scores"

    def supports(self, task: TaskSpec) -> TaskSupport:
        return embedded_support(task)

    def reset_mode(self) -> ResetMode:
        return "hard"  # every reset builds a new Crafter world from the seed

    def agent_instructions(self) -> str:
        return AGENT_INSTRUCTIONS

    @property
    def selected_item(self) -> str:
        return self._adapter.selected_item

    def reset(self, task: TaskSpec, seed: int) -> SimStep:
        self._task = task
        self._adapter.reset()
        self._fallbacks.clear()
        self._counters = {}
        self._deaths = 0
        frame: np.ndarray | None = self._env.reset_world(seed)
        self._state_reader.remember_spawn()
        applied, unsupported = self._apply_init_commands(task.init_commands)
        if applied:
            frame = self._env.frame()  # inventory or creatures changed; the noise RNG is private, so this is safe
        self._last_achievements = dict(self._env.player.achievements)
        info = self._info("noop")
        info["init_commands_applied"] = applied
        info["init_commands_unsupported"] = unsupported
        return SimStep(frame=frame, counters=self._copy_counters(), info=info)

    def step(self, action: EnvAction) -> SimStep:
        crafter_action = self._adapter.translate(action)
        faced = self._state_reader.faced_cell() if crafter_action.startswith("place_") else {}
        frame, _reward, _done, _info = self._env.step(self._env.action_names.index(crafter_action))
        self._state_reader.remember_placed(faced)
        self._count_achievements()
        if self._env.player.health <= 0:
            self._deaths += 1
            outcome = self._env.respawn_player()
            if outcome != "safe":
                self._fallbacks[f"respawn_{outcome}"] += 1
            frame = self._env.frame()
        return SimStep(
            frame=frame,
            counters=self._copy_counters(),
            done=False,
            info=self._info(crafter_action),
            no_effect=list(self._adapter.last_no_effect),
        )

    def state(self) -> GameState:
        return self._state_reader.state()

    def world_seed(self, seed: int) -> tuple[int | None, str]:
        return seed, ""  # every reset builds the world from the arm's seed

    def set_frames(self, enabled: bool) -> None:
        self._env.draws_frames = enabled

    def fallback_counts(self) -> dict[str, int]:
        counts = Counter(self._adapter.counts)
        counts.update(self._fallbacks)
        if self._deaths:
            counts["deaths"] = self._deaths
        return dict(sorted(counts.items()))

    def close(self) -> None:
        self._task = None

    def _count_achievements(self) -> None:
        achievements = self._env.player.achievements
        for name, count in achievements.items():
            delta = count - self._last_achievements.get(name, 0)
            if delta <= 0:
                continue
            for event, obj in ACHIEVEMENT_COUNTERS.get(name, ()):
                per_event = self._counters.setdefault(event, {})
                per_event[obj] = per_event.get(obj, 0) + delta
        self._last_achievements = dict(achievements)

    def _copy_counters(self) -> dict[str, dict[str, int]]:
        return {event: dict(objs) for event, objs in self._counters.items()}

    def _info(self, crafter_action: str) -> dict[str, Any]:
        player = self._env.player
        info: dict[str, Any] = {name: int(player.inventory[name]) for name in VITALS}
        info["inventory"] = {
            name: int(count) for name, count in player.inventory.items() if name not in VITALS and count > 0
        }
        info["deaths"] = self._deaths
        info["life"] = self._deaths + 1
        info["selected_item"] = self._adapter.selected_item
        info["sleeping"] = bool(player.sleeping)
        info["crafter_action"] = crafter_action
        return info

    def _apply_init_commands(self, commands: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """Honour the commands with a Crafter analogue; count and return the rest (never silently dropped)."""
        applied: list[str] = []
        unsupported: list[str] = []
        for command in commands:
            if self._apply_command(command.strip()):
                applied.append(command)
            else:
                unsupported.append(command)
                self._fallbacks["unsupported_command"] += 1
        return applied, unsupported

    def _apply_command(self, command: str) -> bool:
        give = _GIVE.match(command)
        if give:
            return self._give(give.group(1), int(give.group(3) or 1))
        mainhand = _MAINHAND.match(command)
        if mainhand:
            return self._give(mainhand.group(1), int(mainhand.group(2) or 1))
        summon = _SUMMON.match(command)
        if summon and summon.group(1) in SUMMONABLE:
            if self._env.spawn_creature(summon.group(1)):
                return True
            self._fallbacks["summon_no_free_tile"] += 1
        return False

    def _give(self, minecraft_item: str, amount: int) -> bool:
        item = crafter_item_for(minecraft_item)
        if item is None:
            return False
        inventory = self._env.player.inventory
        wanted = inventory[item] + amount
        if wanted > INVENTORY_CAP:
            self._fallbacks["give_capped_at_9"] += 1
        inventory[item] = min(wanted, INVENTORY_CAP)
        return True
