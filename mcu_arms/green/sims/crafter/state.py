"""The embedded simulator's structured state (contracts/game_state.py), read from exactly what the frame shows.

Every field comes from the 9x7 window the frame draws around the player (tiles the night drowns are left out by the
rule in contracts/crafter_view.py), the inventory rows under it, and the player's own sprite (facing, sleeping).
Never read here: the world map outside the window, the hunger/thirst/fatigue timers, creature health, achievements,
the world's random state, the player's absolute position. The capability list is Crafter's public rule book
(`crafter.constants`, from its data.yaml), the same every step.

Imports crafter and numpy: only the embedded backend imports this module.
"""

from __future__ import annotations

from typing import Any

from crafter import constants, objects

from mcu_arms.contracts.crafter_view import PLAYER_CELL, VIEW_COLUMNS, VIEW_ROWS, visible_tiles
from mcu_arms.contracts.game_state import (
    SKILLS,
    Capabilities,
    Direction,
    Entity,
    Faced,
    GameState,
    Gauge,
    Offset,
    Recipe,
    TileSummary,
    View,
    Vitals,
)
from mcu_arms.contracts.simulators import EMBEDDED

VITALS = ("health", "food", "drink", "energy")
OUTSIDE_WORLD = "void"  # the frame leaves it grey
HOSTILE_KINDS = ("zombie", "skeleton", "arrow")
STATIONS = frozenset({"table", "furnace"})
REACH = (-1, 0, 1)  # crafting looks at the 3x3 tiles around the player (objects.Player._make)
NEIGHBOURS: dict[Direction, tuple[int, int]] = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
HOME_STATIONS = frozenset({"table"})  # placing one makes it home (Crafter has no bed)
NO_SUCH_SKILLS = frozenset({"deposit", "withdraw"})  # Crafter has no chests
# Attacking a cow until it dies feeds the player (objects.Player._do_object); data.yaml has no entry for it.
EATING = Recipe(method="collect", item="food", source="cow", yields=6)


def entity_kind(obj: objects.Object) -> str:
    if isinstance(obj, objects.Plant):
        return "ripe_plant" if obj.ripe else "plant"
    return type(obj).__name__.lower()


def crafter_capabilities(aliases: dict[str, str]) -> Capabilities:
    """Crafter's rule book as a capability list: items, and how each is collected, crafted or placed."""
    items = [name for name in constants.items if name not in VITALS]
    recipes = [
        Recipe(method="collect", item=item, source=material, requires=dict(info["require"]), yields=amount)
        for material, info in constants.collect.items()
        for item, amount in info["receive"].items()
    ]
    recipes.append(EATING)
    recipes += [
        Recipe(
            method="craft", item=name, consumes=dict(info["uses"]), stations=list(info["nearby"]), yields=info["gives"]
        )
        for name, info in constants.make.items()
    ]
    recipes += [
        Recipe(method="place", item=name, consumes=dict(info["uses"]), placed_on=list(info["where"]))
        for name, info in constants.place.items()
    ]
    return Capabilities(
        simulator=EMBEDDED.name,
        keymap="crafter",
        items=items,
        inventory_cap=max(info["max"] for info in constants.items.values()),
        skills=[skill for skill in SKILLS if skill not in NO_SUCH_SKILLS],
        recipes=recipes,
        aliases=dict(sorted(aliases.items())),
        walkable=list(constants.walkable),
        hostile=list(HOSTILE_KINDS),
    )


class CrafterStateReader:
    """Builds one GameState per step from the world the frame shows; the capability list is built once."""

    def __init__(self, env, capabilities: Capabilities) -> None:  # env: crafter_world.ReproducibleCrafterEnv
        self._env = env
        self.capabilities = capabilities
        self._maxima = {name: float(constants.items[name]["max"]) for name in VITALS}
        self.home: tuple[int, int] | None = None  # absolute; remembered for the player, who cannot see its position

    def remember_spawn(self) -> None:
        """At reset: home is where the player starts, until it places a table."""
        self.home = (int(self._env.player.pos[0]), int(self._env.player.pos[1]))

    def remember_placed(self, before: dict[tuple[int, int], str]) -> None:
        """After a step: a home station that now stands where `before` had none is the new home."""
        world = self._env.world
        for position, material in before.items():
            if material not in HOME_STATIONS and world[position][0] in HOME_STATIONS:
                self.home = position

    def state(self) -> GameState:
        env = self._env
        player, world = env.player, env.world
        inventory = player.inventory
        vitals = Vitals(**{name: Gauge(value=inventory[name], max=self._maxima[name]) for name in VITALS})
        held = {name: int(count) for name, count in inventory.items() if name not in VITALS and count > 0}
        facing = (int(player.facing[0]), int(player.facing[1]))
        common: dict[str, Any] = dict(
            simulator=EMBEDDED.name,
            vitals=vitals,
            inventory=held,
            facing=Offset(east=facing[0], south=facing[1]),
            sleeping=bool(player.sleeping),
            home=self._home_offset(player),
            capabilities=self.capabilities,
        )
        if player.sleeping:  # the frame shows a greyed view: nothing in it can be told apart
            return GameState(**common)
        daylight = float(world.daylight)
        tiles, entities, hidden = self._window(world, player, visible_tiles(daylight))
        kinds = {offset: kind for kind, offsets in tiles.items() for offset in offsets}
        return GameState(
            **common,
            view=View(width=VIEW_COLUMNS, height=VIEW_ROWS, hidden=hidden, tiles=_summaries(tiles)),
            adjacent={direction: kinds[offset] for direction, offset in NEIGHBOURS.items() if offset in kinds},
            entities=[
                Entity(
                    kind=kind,
                    offset=Offset(east=east, south=south),
                    distance=abs(east) + abs(south),
                    hostile=kind in HOSTILE_KINDS,
                )
                for (east, south), kind in sorted(entities.items(), key=lambda item: _order(item[0]))
            ],
            faced=Faced(tile=kinds[facing], entity=entities.get(facing)) if facing in kinds else None,
            daylight=round(daylight, 3),
            stations_in_reach=sorted(STATIONS & {kinds.get((east, south)) for east in REACH for south in REACH}),
        )

    def _home_offset(self, player) -> Offset | None:
        if self.home is None:
            return None
        return Offset(east=self.home[0] - int(player.pos[0]), south=self.home[1] - int(player.pos[1]))

    def faced_cell(self) -> dict[tuple[int, int], str]:
        """The tile the player faces, by absolute position: what a place action may change."""
        player, world = self._env.player, self._env.world
        target = (int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1]))
        width, height = world.area
        return {target: world[target][0]} if 0 <= target[0] < width and 0 <= target[1] < height else {}

    @staticmethod
    def _window(world, player, visible) -> tuple[dict[str, list[tuple[int, int]]], dict[tuple[int, int], str], int]:
        """Tile kinds by offset, entities by offset (the player left out) and how many tiles the night hides."""
        width, height = world.area
        px, py = int(player.pos[0]), int(player.pos[1])
        column0, row0 = PLAYER_CELL
        names, materials, occupants, registry = world._mat_names, world._mat_map, world._obj_map, world._objects
        tiles: dict[str, list[tuple[int, int]]] = {}
        entities: dict[tuple[int, int], str] = {}
        hidden = 0
        for row in range(VIEW_ROWS):
            south = row - row0
            y = py + south
            for column in range(VIEW_COLUMNS):
                if not visible[row][column]:
                    hidden += 1
                    continue
                east = column - column0
                x = px + east
                if not (0 <= x < width and 0 <= y < height):
                    tiles.setdefault(OUTSIDE_WORLD, []).append((east, south))
                    continue
                tiles.setdefault(names[materials[x, y]], []).append((east, south))
                index = occupants[x, y]
                if index and (east, south) != (0, 0):
                    entities[(east, south)] = entity_kind(registry[index])
        return tiles, entities, hidden


def _order(offset: tuple[int, int]) -> tuple[int, int, int]:
    """Nearest first; ties: north first, then west (the contract's rule)."""
    east, south = offset
    return abs(east) + abs(south), south, east


def _summaries(tiles: dict[str, list[tuple[int, int]]]) -> dict[str, TileSummary]:
    summaries = {}
    for kind in sorted(tiles):
        east, south = min(tiles[kind], key=_order)
        summaries[kind] = TileSummary(
            count=len(tiles[kind]), nearest=Offset(east=east, south=south), distance=abs(east) + abs(south)
        )
    return summaries
