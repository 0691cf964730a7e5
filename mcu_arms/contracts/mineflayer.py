"""The mineflayer backend's agreements: the Minecraft server a user brings, the sidecar's pinned stack, what it counts.

mcu-arms never downloads or starts a Minecraft server. The user runs one (Java Edition, offline mode, the bot's
username op'd for the tasks' init commands) and names it in the arm file's `[mineflayer]` table; `doctor` checks that
it answers and runs the version named. A Node sidecar that ships in the package (green/sims/mineflayer/) drives one
bot on it through Mineflayer; its libraries are installed with `npm ci` from the shipped lockfile into a cache
directory on first use, and so is Node itself (from npm's `node-<os>-<arch>` package) when the system's is older
than NODE_MIN_MAJOR.

Scoring counts MineStudio-style events from what the bot itself did and saw (MINEFLAYER_COUNTED_EVENTS): blocks its
own digs removed, items that reached its inventory from the ground, items its craft and smelt skills made, blocks it
placed and food it ate, and creatures that died or vanished right after its hit. The world is the server's: the
arm's seed is not applied to it, and what one task changed stays for the next (RESET_COMMANDS clear the inventory
only). Pure data and pydantic: light to import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 25565
DEFAULT_VERSION = "1.21.1"  # seed 002's server
DEFAULT_USERNAME = "mcu_agent"

NODE_MIN_MAJOR = 22  # mineflayer >= 4.27 declares node >= 22
NODE_FROM_NPM_VERSION = "22.23.3"  # the node-<os>-<arch> package installed when the system's node is older
SIDECAR_PACKAGES: dict[str, str] = {"mineflayer": "4.37.1", "mineflayer-pathfinder": "2.4.5", "vec3": "0.1.10"}
CACHE_DIR_ENV = "MCU_ARMS_CACHE_DIR"

# Sent before a task's own init commands, so that each task starts with an empty inventory (vanilla syntax).
RESET_COMMANDS: tuple[str, ...] = ("/clear @s",)
# What a server says when it refuses a command (vanilla, Paper, flying-squid): such a reply means it did not run.
REFUSAL_MARKERS: tuple[str, ...] = (
    "Unknown or incomplete command",
    "Incorrect argument",
    "<--[HERE]",
    "No player was found",
    "No entity was found",
    "Unknown item",
    "You do not have permission",
    "Command not found",
    "Error:",
)
RESET_MODE = "server_world"  # the server's world as it is, inventory cleared: not a function of the seed
MINEFLAYER_COUNTED_EVENTS: tuple[str, ...] = ("mine_block", "pickup", "craft_item", "use_item", "kill_entity")
# Names MCU's task files use that are no Minecraft 1.21 item or block, with the names that are.
NOT_AN_ITEM: dict[str, str] = {
    "log": "oak_log, spruce_log, birch_log, jungle_log, acacia_log, dark_oak_log",
    "boat": "oak_boat (and each other wood's boat)",
    "wool": "white_wool (and each other colour's wool)",
    "grass": "short_grass (renamed in 1.20.3)",
}

# The rule book the capability list carries (recipes from the server version's minecraft-data, read by the sidecar):
# what can be crafted, collected from which block, smelted and placed on the way through MCU's tasks.
RULEBOOK_CRAFTS: tuple[str, ...] = (
    "oak_planks",
    "birch_planks",
    "spruce_planks",
    "stick",
    "crafting_table",
    "chest",
    "furnace",
    "torch",
    "bowl",
    "wooden_pickaxe",
    "wooden_axe",
    "wooden_shovel",
    "wooden_sword",
    "stone_pickaxe",
    "stone_axe",
    "stone_shovel",
    "stone_sword",
    "iron_pickaxe",
    "iron_axe",
    "iron_shovel",
    "iron_sword",
    "bucket",
    "shears",
    "diamond_pickaxe",
    "diamond_sword",
)
RULEBOOK_SOURCES: tuple[str, ...] = (
    "oak_log",
    "birch_log",
    "spruce_log",
    "jungle_log",
    "acacia_log",
    "dark_oak_log",
    "stone",
    "cobblestone",
    "coal_ore",
    "iron_ore",
    "deepslate_iron_ore",
    "copper_ore",
    "diamond_ore",
    "deepslate_diamond_ore",
    "dirt",
    "grass_block",
    "sand",
    "gravel",
    "clay",
    "oak_leaves",
    "short_grass",
    "obsidian",
)
# Furnace recipes (vanilla 1.21; minecraft-data has none): input -> output.
SMELTING: dict[str, str] = {
    "raw_iron": "iron_ingot",
    "raw_gold": "gold_ingot",
    "raw_copper": "copper_ingot",
    "sand": "glass",
    "cobblestone": "stone",
    "oak_log": "charcoal",
    "beef": "cooked_beef",
    "porkchop": "cooked_porkchop",
    "chicken": "cooked_chicken",
    "mutton": "cooked_mutton",
}
FUELS: tuple[str, ...] = ("coal", "charcoal", "oak_planks", "birch_planks", "spruce_planks", "oak_log", "stick")
PLACEABLE: tuple[str, ...] = (
    "crafting_table",
    "furnace",
    "chest",
    "torch",
    "cobblestone",
    "dirt",
    "oak_planks",
    "oak_log",
)
# Other names a plan may use (Crafter's, and MCU's generic ones), mapped onto Minecraft's.
ALIASES: dict[str, str] = {
    "wood": "oak_log",
    "log": "oak_log",
    "planks": "oak_planks",
    "table": "crafting_table",
    "wood_pickaxe": "wooden_pickaxe",
    "wood_sword": "wooden_sword",
    "iron": "iron_ingot",
    "sapling": "oak_sapling",
}


class MineflayerServer(BaseModel):
    """The Minecraft server an arm plays on, and the bot's name there (the arm file's `[mineflayer]` table)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    host: str = Field(default=DEFAULT_HOST, description=f"the Minecraft server's address (default {DEFAULT_HOST})")
    port: int = Field(
        default=DEFAULT_PORT, ge=1, le=65535, description=f"the server's port, 1-65535 (default {DEFAULT_PORT})"
    )
    version: str = Field(
        default=DEFAULT_VERSION,
        pattern=r"^\d+\.\d+(\.\d+)?$",
        description='the Java Edition version it runs, e.g. "1.21.1" (doctor checks it answers so)',
    )
    username: str = Field(
        default=DEFAULT_USERNAME,
        pattern=r"^[A-Za-z0-9_]{3,16}$",
        description="the bot's name, 3-16 letters, digits or '_' (op it on the server for the tasks' commands)",
    )
    # post the agent's tagged decisions (ActionPayload.say) in the game's chat, to watch a run
    chat: bool = Field(
        default=False,
        description="true or false (default): post the planned agent's decisions in the game's chat, tagged by source",
    )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def cache_root(env: Mapping[str, str]) -> Path:
    """Where npm installs go: $MCU_ARMS_CACHE_DIR, else ~/.cache/mcu-arms (of the HOME in `env`)."""
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV])
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cache" / "mcu-arms"
