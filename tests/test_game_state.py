"""The embedded simulator's structured state holds what the frame shows, nothing more.

The state is compared with an independent reading of the same frame: the scripted player's frame reader, which sees
pixels only. Anything the state says that the frame does not show (a tile outside the window, a tile the night
drowns, a creature's health, the player's position) fails these tests.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

pytest.importorskip("crafter")

from mcu_arms.contracts.crafter_keymap import env_action_for
from mcu_arms.contracts.crafter_view import PLAYER_CELL, VIEW_COLUMNS, VIEW_ROWS, visible_tiles
from mcu_arms.contracts.game_state import GameState
from mcu_arms.contracts.tasks import TaskSpec
from mcu_arms.green.sims.crafter.embedded import EmbeddedSimulator
from mcu_arms.purple.crafter_vision import MATERIALS, OBJECTS, FrameReader

TASK = TaskSpec(name="state", category="crafting", text="state")
# The keys a GameState may hold, at any depth: a new key must be added here on purpose, after asking whether the
# player could know it.
ALLOWED_KEYS = {
    "schema_version",
    "simulator",
    "vitals",
    "health",
    "food",
    "drink",
    "energy",
    "value",
    "max",
    "inventory",
    "view",
    "width",
    "height",
    "hidden",
    "tiles",
    "count",
    "nearest",
    "distance",
    "east",
    "south",
    "up",
    "adjacent",
    "north",
    "west",
    "entities",
    "kind",
    "offset",
    "hostile",
    "facing",
    "faced",
    "tile",
    "entity",
    "daylight",
    "stations_in_reach",
    "sleeping",
    "position",
    "equipment",
    "capabilities",
    "keymap",
    "items",
    "inventory_cap",
    "skills",
    "recipes",
    "method",
    "item",
    "source",
    "consumes",
    "requires",
    "stations",
    "placed_on",
    "yields",
    "aliases",
    "walkable",
    "actions",
    "foods",
    "feasible",
    "home",
}
PRIVILEGED = ("achievements", "semantic", "player_pos", "_hunger", "_thirst", "_fatigue", "_recover", "cooldown")
ENTITY_KIND = {"plant-ripe": "ripe_plant"}
WALK = ("move_left", "move_right", "move_up", "move_down", "do", "do", "noop")


@pytest.fixture(scope="module")
def reader() -> FrameReader:
    return FrameReader()


NAME_MAPS = ("inventory", "tiles", "aliases", "consumes", "requires")  # keyed by item or tile names, not fields


def _keys(value, found: set[str], *, names: bool = False) -> set[str]:
    """Every field name at any depth (the keys of maps keyed by item or tile names are names, not fields)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not names:
                found.add(key)
            _keys(item, found, names=not names and key in NAME_MAPS)
    elif isinstance(value, list):
        for item in value:
            _keys(item, found)
    return found


def _entity(code: int) -> str | None:
    name = OBJECTS[code]
    if name == "none" or name.startswith("player"):
        return None
    return ENTITY_KIND.get(name, name.split("-")[0])


def _read_window(reading) -> tuple[dict[str, list[tuple[int, int]]], dict[tuple[int, int], str]]:
    """Tile kinds and entities by offset, from the frame reader, over the tiles it can make out."""
    column0, row0 = PLAYER_CELL
    tiles: dict[str, list[tuple[int, int]]] = {}
    entities: dict[tuple[int, int], str] = {}
    for row in range(VIEW_ROWS):
        for column in range(VIEW_COLUMNS):
            if not reading.reliable[row, column]:
                continue
            offset = (column - column0, row - row0)
            tiles.setdefault(MATERIALS[reading.materials[row, column]], []).append(offset)
            kind = _entity(reading.objects[row, column])
            if kind is not None:
                entities[offset] = kind
    return tiles, entities


def _states_and_frames(seed: int, steps: int, every: int):
    sim = EmbeddedSimulator()
    sim.reset(TASK, seed)
    rng = random.Random(seed)
    for step in range(steps):
        sim_step = sim.step(env_action_for(rng.choice(WALK)))
        if step % every == 0:
            yield sim.state(), sim_step.frame
    sim.close()


def _compare(state: GameState, frame: np.ndarray, reader: FrameReader) -> list[str]:
    """Every disagreement between the state and what the frame shows."""
    reading = reader.read(frame)
    problems = []
    vitals = {name: int(getattr(state.vitals, name).value) for name in ("health", "food", "drink", "energy")}
    shown = {item: count for item, count in reading.inventory.items() if count and item not in vitals}
    if vitals != {name: reading.inventory[name] for name in vitals}:
        problems.append(f"vitals {vitals} vs the frame's {reading.inventory}")
    if state.inventory != shown:
        problems.append(f"inventory {state.inventory} vs the frame's {shown}")
    if state.sleeping != reading.sleeping:
        problems.append(f"sleeping {state.sleeping} vs {reading.sleeping}")
    if reading.sleeping:
        if state.view is not None or state.entities is not None:
            problems.append("a sleeping player's state shows the view")
        return problems
    if (state.facing.east, state.facing.south) != reading.facing:
        problems.append(f"facing {state.facing} vs {reading.facing}")
    if abs(state.daylight - reading.daylight) > 0.05:
        problems.append(f"daylight {state.daylight} vs {reading.daylight:.3f}")
    tiles, entities = _read_window(reading)
    if state.view.hidden != int((~reading.reliable).sum()):
        problems.append(f"{state.view.hidden} hidden tiles vs {int((~reading.reliable).sum())} unreadable")
    counts = {kind: len(offsets) for kind, offsets in tiles.items()}
    if {kind: summary.count for kind, summary in state.view.tiles.items()} != counts:
        problems.append(f"tile counts {state.view.tiles} vs the frame's {counts}")
    for kind, summary in state.view.tiles.items():
        nearest = (summary.nearest.east, summary.nearest.south)
        closest = min((abs(e) + abs(s) for e, s in tiles.get(kind, [])), default=None)
        if nearest not in tiles.get(kind, []) or summary.distance != closest:
            problems.append(f"nearest {kind} at {nearest} is not one the frame shows at the least distance")
    stated = {(e.offset.east, e.offset.south): e.kind for e in state.entities}
    if stated != entities:
        problems.append(f"entities {stated} vs the frame's {entities}")
    kinds = {offset: kind for kind, offsets in tiles.items() for offset in offsets}
    if state.faced.tile != kinds[reading.facing]:
        problems.append(f"faced {state.faced.tile} vs the frame's {kinds[reading.facing]}")
    reach = sorted({kinds[(e, s)] for e in (-1, 0, 1) for s in (-1, 0, 1)} & {"table", "furnace"})
    if state.stations_in_reach != reach:
        problems.append(f"stations in reach {state.stations_in_reach} vs {reach}")
    return problems


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow
def test_the_state_by_day_is_exactly_what_the_frame_shows(reader: FrameReader, seed: int) -> None:
    compared = 0
    for state, frame in _states_and_frames(seed, steps=150, every=3):  # day: the first night falls near step 180
        problems = _compare(state, frame, reader)
        assert problems == [], f"seed {seed}, state #{compared}: {problems}"
        compared += 1
    assert compared == 50


@pytest.mark.slow
def test_the_state_at_night_hides_the_tiles_the_frame_drowns(reader: FrameReader) -> None:
    """At night the reader estimates the daylight from the frame (a little low, so it gives up a few more tiles):
    the state must hide about as many tiles as that brightness drowns, and agree with every tile the reader is sure
    of."""
    compared = 0
    for state, frame in _states_and_frames(2, steps=300, every=4):
        if state.daylight is None or state.daylight > 0.3:
            continue
        compared += 1
        reading = reader.read(frame)
        drowned = [
            sum(not tile for row in visible_tiles(max(0.0, reading.daylight + slack)) for tile in row)
            for slack in (0.03, -0.03)
        ]
        assert drowned[0] <= state.view.hidden <= drowned[1], f"daylight {state.daylight}: {state.view.hidden} hidden"
        tiles, entities = _read_window(reading)
        for kind, offsets in tiles.items():
            stated = state.view.tiles[kind].count if kind in state.view.tiles else 0
            assert stated >= len(offsets) - 1, f"the frame shows {len(offsets)} {kind}, the state {stated}"
        stated_entities = {(e.offset.east, e.offset.south): e.kind for e in state.entities}
        assert len(set(entities.items()) - set(stated_entities.items())) <= 1
    assert compared >= 10, "the run must cross a dark night"


@pytest.mark.slow
def test_no_state_ever_holds_a_privileged_field() -> None:
    keys: set[str] = set()
    for state, _ in _states_and_frames(3, steps=240, every=2):
        data = json.loads(state.model_dump_json())
        keys |= _keys(data, set())
        assert state.position is None and state.equipment is None
        assert all(
            set(json.loads(e.model_dump_json())) == {"kind", "offset", "distance", "hostile"}
            for e in state.entities or []
        )
    assert keys <= ALLOWED_KEYS, f"unexpected keys: {sorted(keys - ALLOWED_KEYS)}"
    assert not any(word in key for key in keys for word in PRIVILEGED)


def test_a_creature_outside_the_window_is_not_in_the_state() -> None:
    from crafter import objects

    sim = EmbeddedSimulator()
    sim.reset(TASK, 0)
    env = sim._env
    player = env.player
    for obj in list(env.world.objects):
        if obj is not player:
            env.world.remove(obj)
    beyond = (int(player.pos[0]) + 5, int(player.pos[1]))  # one column past the window's east edge
    inside = (int(player.pos[0]) + 4, int(player.pos[1]) - 3)  # its north-east corner
    for pos in (beyond, inside):
        env.world[pos] = "grass"
        env.world.add(objects.Cow(env.world, pos))
    state = sim.state()
    assert [(e.kind, e.offset.east, e.offset.south) for e in state.entities] == [("cow", 4, -3)]
    assert state.view.width * state.view.height == sum(t.count for t in state.view.tiles.values()) + state.view.hidden


@pytest.mark.slow
def test_turning_frames_off_changes_no_state() -> None:
    framed, bare = EmbeddedSimulator(), EmbeddedSimulator()
    bare.set_frames(False)
    framed.reset(TASK, 4)
    assert bare.reset(TASK, 4).frame is None
    rng = random.Random(4)
    for _ in range(400):  # across a night: the renderer's noise must not move the world
        action = env_action_for(rng.choice(WALK + ("sleep", "place_table", "make_wood_pickaxe")))
        assert framed.step(action).frame is not None
        assert bare.step(action).frame is None
        assert framed.state() == bare.state()


def test_the_capability_list_is_crafters_rule_book() -> None:
    sim = EmbeddedSimulator()
    sim.reset(TASK, 0)
    capabilities = sim.state().capabilities
    recipes = {(r.method, r.item): r for r in capabilities.recipes}
    assert recipes[("collect", "wood")].source == "tree"
    assert recipes[("collect", "stone")].requires == {"wood_pickaxe": 1}
    assert recipes[("craft", "wood_pickaxe")].stations == ["table"]
    assert recipes[("place", "table")].consumes["wood"] >= 1
    assert capabilities.aliases["oak_log"] == "wood" and capabilities.aliases["crafting_table"] == "table"
    assert capabilities.inventory_cap == 9 and "health" not in capabilities.items


def test_home_is_the_spawn_until_a_table_is_placed_then_that_table_wherever_the_player_goes() -> None:
    sim = EmbeddedSimulator()
    sim.set_frames(False)
    sim.reset(TASK, 0)
    start = sim.state()
    assert (start.home.east, start.home.south) == (0, 0), "at the spawn, home is here"
    player, world = sim._env.player, sim._env.world
    walked = 0
    for _ in range(40):  # walk off the spawn: home stays where the spawn was
        sim.step(env_action_for(random.Random(walked).choice(["move_left", "move_right", "move_up", "move_down"])))
        walked += 1
    spawn_offset = sim.state().home
    moved = (int(player.pos[0]) - int(sim._state_reader.home[0]), int(player.pos[1]) - int(sim._state_reader.home[1]))
    assert (spawn_offset.east, spawn_offset.south) == (-moved[0], -moved[1])
    player.inventory["wood"] = 2
    for direction in ("move_left", "move_right", "move_up", "move_down"):  # face a grass tile, then place on it
        facing = (int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1]))
        if world[facing][0] in ("grass", "sand", "path") and world[facing][1] is None:
            break
        sim.step(env_action_for(direction))
    facing = (int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1]))
    sim.step(env_action_for("place_table"))
    assert world[facing][0] == "table", "the table was placed"
    placed = sim.state()
    assert (placed.home.east, placed.home.south) == (facing[0] - int(player.pos[0]), facing[1] - int(player.pos[1]))
    assert placed.home.model_dump(exclude_none=True) == placed.view.tiles["table"].nearest.model_dump(exclude_none=True)
