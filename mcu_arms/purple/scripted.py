"""The `scripted` purple agent: a heuristic Crafter player that sees only the 128x128 frame.

It is the non-neural reference arm for the embedded simulator: it reads each frame with `crafter_vision`, keeps its
own map of what it has seen (positions are relative to where it started, tracked from its own moves and checked
against the map), and works down the MCU diamond chain (wood, table, wooden pickaxe, stone, stone pickaxe, coal,
iron, furnace, iron pickaxe, diamond) while staying alive: drinking, eating cows, fighting what comes adjacent and
sleeping walled into a dug pocket. Every choice is deterministic given the seed.

It answers in the env format through `env_action_for`, the embedded simulator's own public table, so the real
key mapping is exercised. It needs Crafter's textures (the crafter package) and numpy; nothing else.
"""

from __future__ import annotations

import random
from collections import Counter
from heapq import heappop, heappush
from pathlib import Path

import numpy as np

from mcu_arms.atomic import write_json_atomic
from mcu_arms.contracts.agent_report import ScriptedEpisode, ScriptedReport, report_name
from mcu_arms.contracts.crafter_keymap import env_action_for
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.contracts.wire import AckPayload, ActionPayload, InitPayload, ObservationPayload
from mcu_arms.process.procs import log_line
from mcu_arms.purple.base import Policy
from mcu_arms.purple.crafter_vision import (
    MATERIAL_CODE,
    MATERIALS,
    OBJECTS,
    PLAYER_CELL,
    VIEW_COLUMNS,
    VIEW_ROWS,
    FrameReader,
    FrameReading,
    decode_observation,
)

UNKNOWN = -1
MAP_SIZE = 160  # relative map; Crafter's world is 64x64, so any start fits with a view's margin
ORIGIN = MAP_SIZE // 2
BLOCKED = 10_000.0
MOVES: dict[tuple[int, int], str] = {
    (-1, 0): "move_left",
    (1, 0): "move_right",
    (0, -1): "move_up",
    (0, 1): "move_down",
}
DIRECTIONS = tuple(MOVES)

WALKABLE = frozenset(MATERIAL_CODE[name] for name in ("grass", "sand", "path"))
# What mining each material needs (None: nothing), and which inventory item it is counted in.
MINE_REQUIREMENT: dict[str, str | None] = {
    "tree": None,
    "stone": "wood_pickaxe",
    "coal": "wood_pickaxe",
    "iron": "stone_pickaxe",
    "diamond": "iron_pickaxe",
}
RESOURCE_OF: dict[str, str] = {"tree": "wood", "stone": "stone", "coal": "coal", "iron": "iron", "diamond": "diamond"}
HOSTILE = frozenset(("zombie", "skeleton"))

TABLE_WOOD, FURNACE_STONE = 2, 4  # Crafter 1.8.3 recipe costs
WOOD_BEFORE_TABLE = 5  # table, wooden pickaxe, wooden sword, and one for the stone pickaxe
STONE_STOCK = 6  # a furnace plus spares for walling in at night and bridging water
TABLE_REUSE_COST = 30.0  # walk back to a known table when it is this close; otherwise build another
THIRST_LIMIT, HUNGER_LIMIT, FATIGUE_LIMIT = 4, 4, 3
NIGHT_DAYLIGHT = 0.3  # darker than this, zombies crowd the grass: sleep early if at all tired
LOST_MISMATCHES = 8  # this many disagreeing tiles and the position is re-searched
REPORT_NAME = report_name("scripted")


def _kind(obj_code: int) -> str:
    return OBJECTS[obj_code].split("-")[0]


class WorldMemory:
    """What the agent has seen, in map coordinates relative to its start (x east, y south)."""

    def __init__(self) -> None:
        self.materials = np.full((MAP_SIZE, MAP_SIZE), UNKNOWN, np.int16)
        self.position = (0, 0)
        self.objects: dict[tuple[int, int], str] = {}  # creatures in the latest frame only

    def view_slice(self, position: tuple[int, int]) -> tuple[slice, slice]:
        column, row = PLAYER_CELL
        x, y = position[0] + ORIGIN - column, position[1] + ORIGIN - row
        return slice(y, y + VIEW_ROWS), slice(x, x + VIEW_COLUMNS)

    def mismatches(self, reading: FrameReading, position: tuple[int, int]) -> int:
        known = self.materials[self.view_slice(position)]
        return int(((known != UNKNOWN) & reading.reliable & (known != reading.materials)).sum())

    def locate(self, reading: FrameReading) -> tuple[int, int] | None:
        """Where on the whole map the frame fits best, if it fits well and nowhere else does."""
        windows = np.lib.stride_tricks.sliding_window_view(self.materials, (VIEW_ROWS, VIEW_COLUMNS))
        known = (windows != UNKNOWN) & reading.reliable
        seen = known.sum(axis=(2, 3))
        wrong = (known & (windows != reading.materials)).sum(axis=(2, 3))
        wrong = np.where(seen >= 30, wrong, VIEW_ROWS * VIEW_COLUMNS)
        if wrong.min() > 2:
            return None
        column, row = PLAYER_CELL
        fits = [
            (int(left) + column - ORIGIN, int(top) + row - ORIGIN) for top, left in np.argwhere(wrong == wrong.min())
        ]
        if len(fits) > 1:
            return None  # several places fit equally: a guess would corrupt the map
        return fits[0]

    def record(self, reading: FrameReading) -> None:
        """Write the reliably read tiles into the map; creatures are kept from this frame only."""
        block = self.materials[self.view_slice(self.position)]
        block[reading.reliable] = reading.materials[reading.reliable]
        column, row = PLAYER_CELL
        self.objects = {}
        for view_row, view_column in zip(*np.nonzero(reading.objects * reading.reliable), strict=True):
            kind = _kind(reading.objects[view_row, view_column])
            if kind != "player":
                cell = (self.position[0] + int(view_column) - column, self.position[1] + int(view_row) - row)
                self.objects[cell] = kind

    def material(self, cell: tuple[int, int]) -> int:
        return int(self.materials[cell[1] + ORIGIN, cell[0] + ORIGIN])

    def is_free(self, cell: tuple[int, int]) -> bool:
        return self.material(cell) in WALKABLE and cell not in self.objects


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0], a[1] + b[1])


def _dilate4(mask: np.ndarray) -> np.ndarray:
    grown = np.zeros_like(mask)
    grown[1:, :] |= mask[:-1, :]
    grown[:-1, :] |= mask[1:, :]
    grown[:, 1:] |= mask[:, :-1]
    grown[:, :-1] |= mask[:, 1:]
    return grown


def _dilate8(mask: np.ndarray) -> np.ndarray:
    grown = mask | _dilate4(mask)
    return grown | _dilate4(grown)


class CrafterPlayer:
    """Chooses one Crafter action name per frame. Synchronous and self-contained, so tests can drive it directly."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.reader = FrameReader()
        self.memory = WorldMemory()
        self.stats: Counter[str] = Counter()  # relocalisations, respawns, shelters built: reported, never hidden
        self._last_reading: FrameReading | None = None
        self._last_action = "noop"
        self._drinking = False
        self._eating = False
        self._shelter: tuple[tuple[int, int], tuple[int, int]] | None = None  # (entrance, inward direction)

    # --- perception -------------------------------------------------------------------------------------------
    def observe(self, frame: np.ndarray) -> FrameReading:
        reading = self.reader.read(frame)
        if not reading.sleeping:
            self._update_position(reading)
            self.memory.record(reading)
        self._last_reading = reading
        return reading

    def _update_position(self, reading: FrameReading) -> None:
        memory, previous = self.memory, self._last_reading
        if previous is None:
            return
        if self._respawned(previous, reading):
            self.stats["respawns_detected"] += 1
            found = memory.locate(reading)
            if found is None:
                self._start_new_map()
            else:
                memory.position = found
            return
        stay = memory.position
        hypotheses = [stay]
        moved_to = None
        direction = next((d for d, name in MOVES.items() if name == self._last_action), None)
        if direction is not None:
            moved_to = _add(stay, direction)
            hypotheses.append(moved_to)
        predicted = moved_to if moved_to is not None and self._move_expected(previous, moved_to) else stay
        scores = {cell: memory.mismatches(reading, cell) for cell in hypotheses}
        best = min(hypotheses, key=lambda cell: (scores[cell], cell != predicted))
        memory.position = best
        if scores[best] > LOST_MISMATCHES:
            self.stats["relocalisations"] += 1
            found = memory.locate(reading)
            if found is None:
                self._start_new_map()
            else:
                memory.position = found

    def _start_new_map(self) -> None:
        """Lost beyond repair: forget the map rather than act on a wrong one."""
        self.stats["maps_restarted"] += 1
        self.memory = WorldMemory()
        self._shelter = None

    def _move_expected(self, previous: FrameReading, target: tuple[int, int]) -> bool:
        return (
            not previous.sleeping
            and self.memory.material(target) in WALKABLE | {MATERIAL_CODE["lava"]}
            and (target not in self.memory.objects)
        )

    @staticmethod
    def _respawned(previous: FrameReading, reading: FrameReading) -> bool:
        """The embedded simulator respawns a dead player near the start with full vitals and nothing else."""
        return reading.inventory["health"] - previous.inventory["health"] >= 2  # health regrows one point at most

    # --- decision ---------------------------------------------------------------------------------------------
    def act(self, frame: np.ndarray) -> str:
        reading = self.observe(frame)
        action = "noop" if reading.sleeping else self._decide(reading)
        self._last_action = action
        return action

    def _decide(self, reading: FrameReading) -> str:
        inventory = reading.inventory
        threat = self._adjacent(HOSTILE)
        if threat is not None:
            return self._interact(reading, threat, "do")
        self._drinking = inventory["drink"] < 9 and (self._drinking or inventory["drink"] <= THIRST_LIMIT)
        self._eating = inventory["food"] < 6 and (self._eating or inventory["food"] <= HUNGER_LIMIT)
        if inventory["energy"] >= 9:
            self._shelter = None
        tired = inventory["energy"] <= FATIGUE_LIMIT
        dark_and_weary = reading.daylight < NIGHT_DAYLIGHT and inventory["energy"] < 8
        hurt = inventory["health"] <= 3 and inventory["energy"] < 9
        if tired or dark_and_weary or hurt or (self._shelter and inventory["energy"] < 9):
            action = self._sleep(reading, in_the_open=tired)
            if action is not None:
                return action
        if self._drinking:
            return self._collect(reading, {"water"}, "do")
        if self._eating:
            cow = self._adjacent({"cow"})
            if cow is not None:
                return self._interact(reading, cow, "do")
            cows = self._object_mask("cow")
            if cows.any():
                return self._go(reading, _dilate4(cows))
            return self._explore(reading)
        return self._progress(reading)

    def _progress(self, reading: FrameReading) -> str:
        inv = reading.inventory
        if self._near("table"):
            for item, recipe, stone, prerequisite in (
                ("wood_pickaxe", "make_wood_pickaxe", 0, "health"),
                ("wood_sword", "make_wood_sword", 0, "health"),
                ("stone_sword", "make_stone_sword", 1, "stone_pickaxe"),
            ):
                if not inv[item] and inv[prerequisite] and inv["wood"] >= 1 and inv["stone"] >= stone:
                    return recipe
        if not inv["wood_pickaxe"]:
            return self._get_crafting_site(reading, wood_needed=1, stock=WOOD_BEFORE_TABLE)
        if not inv["stone_pickaxe"]:
            if inv["stone"] < 1 or inv["wood"] < 1:
                return self._gather(reading, {"stone": 1, "wood": 1})
            if self._near("table"):
                return "make_stone_pickaxe"
            return self._get_crafting_site(reading, wood_needed=1, stock=1 + TABLE_WOOD)
        if not inv["iron_pickaxe"]:
            needs = {"wood": 1, "coal": 1, "iron": 1, "stone": 1}
            if not self._reachable_furnace_site():
                needs["stone"] = FURNACE_STONE
            if any(inv[item] < count for item, count in needs.items()):
                return self._gather(reading, {**needs, "stone": max(needs["stone"], min(STONE_STOCK, 9))})
            if self._near("table") and self._near("furnace"):
                return "make_iron_pickaxe"
            if self._near("table") and inv["stone"] >= FURNACE_STONE:
                return self._place(reading, "place_furnace", keep_near="table")
            if self._reachable_furnace_site():
                return self._go(reading, self._site_mask(("table", "furnace")))
            return self._get_crafting_site(reading, wood_needed=1, stock=1 + TABLE_WOOD)
        return self._gather(reading, {"diamond": 9, "stone": STONE_STOCK, "wood": 3})

    # --- goals --------------------------------------------------------------------------------------------------
    def _get_crafting_site(self, reading: FrameReading, wood_needed: int, stock: int) -> str:
        """Walk to a known table when it is close, else build one here, gathering wood first if short."""
        tables = self._site_mask(("table",))
        if tables.any():
            path = self._path(reading, tables)
            if path is not None and len(path) <= TABLE_REUSE_COST:
                return self._follow(reading, path)
        if reading.inventory["wood"] >= TABLE_WOOD + wood_needed and (
            reading.inventory["wood"] >= stock or not self._known("tree")
        ):
            return self._place(reading, "place_table")
        return self._gather(reading, {"wood": stock})

    def _gather(self, reading: FrameReading, wanted: dict[str, int]) -> str:
        """Mine the nearest material that yields a wanted item we can mine now; explore when none is known."""
        inv = reading.inventory
        targets = [
            material
            for material, item in RESOURCE_OF.items()
            if inv[item] < wanted.get(item, 0) and self._can_mine(material, inv)
        ]
        if not targets:
            return self._explore(reading)
        return self._collect(reading, set(targets), "do")

    def _collect(self, reading: FrameReading, materials: set[str], action: str) -> str:
        for direction in DIRECTIONS:
            cell = _add(self.memory.position, direction)
            if MATERIALS[self.memory.material(cell)] in materials and cell not in self.memory.objects:
                return self._interact(reading, cell, action)
        mask = np.isin(self.memory.materials, [MATERIAL_CODE[m] for m in materials])
        if not mask.any():
            return self._explore(reading, prefer=materials)
        path = self._path(reading, _dilate4(mask))
        if path is None:
            return self._explore(reading, prefer=materials)
        return self._follow(reading, path)

    def _go(self, reading: FrameReading, goal: np.ndarray) -> str:
        path = self._path(reading, goal)
        return self._follow(reading, path) if path is not None else self._explore(reading)

    def _explore(self, reading: FrameReading, prefer: set[str] | None = None) -> str:
        """Head for the nearest unseen tile; when looking for ores, unseen tiles next to stone come first."""
        unknown = self.memory.materials == UNKNOWN
        if prefer and prefer & {"stone", "coal", "iron", "diamond"}:
            rocky = np.isin(self.memory.materials, [MATERIAL_CODE[m] for m in ("stone", "path", "coal", "iron")])
            near_rock = unknown & _dilate8(_dilate8(rocky))
            if near_rock.any():
                path = self._path(reading, near_rock)
                if path is not None:
                    return self._follow(reading, path)
        path = self._path(reading, unknown)
        if path is not None:
            return self._follow(reading, path)
        return self._wander()

    def _sleep(self, reading: FrameReading, in_the_open: bool) -> str | None:
        """Dig a two-tile dead end into rock, step back to face its mouth, wall it with stone, then sleep.

        With no shelter in reach it sleeps in the open only when exhausted (a sleeper takes 7 damage from a
        zombie, not 2); otherwise it returns None and the agent carries on awake.
        """
        position = self.memory.position
        if self._shelter is None:
            self._shelter = self._find_shelter(reading)
            if self._shelter is None:
                if not in_the_open:
                    return None
                self.stats["slept_in_open"] += 1
                return "sleep"
            self.stats["shelters_started"] += 1
        entrance, inward = self._shelter
        mouth, end = _add(entrance, inward), _add(entrance, (2 * inward[0], 2 * inward[1]))
        outward = (-inward[0], -inward[1])
        if position == mouth and not self.memory.is_free(entrance) and self.memory.material(entrance) != UNKNOWN:
            self._shelter = None if reading.inventory["energy"] >= 9 else self._shelter
            return "sleep"
        if position == mouth and reading.facing == outward:
            if reading.inventory["stone"] < 1 or entrance in self.memory.objects:
                self._shelter = None
                return "sleep" if in_the_open else None
            return "place_stone"
        if position == end:
            return MOVES[outward] if self.memory.is_free(mouth) else self._interact(reading, mouth, "do")
        if position == mouth:
            return self._step_into(reading, end)
        if position == entrance:
            return self._step_into(reading, mouth)
        goal = np.zeros_like(self.memory.materials, bool)
        goal[entrance[1] + ORIGIN, entrance[0] + ORIGIN] = True
        path = self._path(reading, goal)
        if path is None:
            self._shelter = None
            return "sleep" if in_the_open else None
        return self._follow(reading, path)

    def _find_shelter(self, reading: FrameReading) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """A nearby entrance and direction whose two inner tiles are diggable and walled in on every other side."""
        if not reading.inventory["wood_pickaxe"] and reading.inventory["stone"] < 1:
            return None
        materials = self.memory.materials
        walls = (materials != UNKNOWN) & ~np.isin(materials, list(WALKABLE) + [MATERIAL_CODE["lava"]])
        diggable = np.isin(materials, list(WALKABLE) + [MATERIAL_CODE["stone"]])
        x0, y0 = self.memory.position
        best, best_distance = None, None
        for dy in range(-8, 9):
            for dx in range(-8, 9):
                entrance = (x0 + dx, y0 + dy)
                if self.memory.material(entrance) not in WALKABLE:
                    continue
                for inward in DIRECTIONS:
                    if self._shelter_fits(entrance, inward, walls, diggable):
                        distance = abs(dx) + abs(dy)
                        if best_distance is None or distance < best_distance:
                            best, best_distance = (entrance, inward), distance
        return best

    @staticmethod
    def _shelter_fits(entrance, inward, walls: np.ndarray, diggable: np.ndarray) -> bool:
        side = (inward[1], inward[0])
        cells = [_add(entrance, (inward[0] * k, inward[1] * k)) for k in (1, 2, 3)]
        mouth, end, back = cells

        def at(mask, cell):
            return bool(mask[cell[1] + ORIGIN, cell[0] + ORIGIN])

        needed_walls = [back] + [_add(c, s) for c in (mouth, end) for s in (side, (-side[0], -side[1]))]
        return at(diggable, mouth) and at(diggable, end) and all(at(walls, cell) for cell in needed_walls)

    # --- movement and interaction ---------------------------------------------------------------------------------
    def _step_into(self, reading: FrameReading, cell: tuple[int, int]) -> str:
        return self._follow(reading, [self.memory.position, cell])

    def _interact(self, reading: FrameReading, cell: tuple[int, int], action: str) -> str:
        """Face `cell` (a move towards a blocked tile only turns) and then act on it."""
        direction = (cell[0] - self.memory.position[0], cell[1] - self.memory.position[1])
        if reading.facing != direction:
            return MOVES[direction]
        return action

    def _place(self, reading: FrameReading, action: str, keep_near: str | None = None) -> str:
        """Place on the faced tile when it takes it; otherwise step so that the next faced tile will."""
        position = self.memory.position
        ahead = _add(position, reading.facing)
        if self.memory.is_free(ahead):
            return action
        options = []
        for direction in DIRECTIONS:
            step = _add(position, direction)
            if not self.memory.is_free(step):
                continue
            if keep_near and not self._near(keep_near, step):
                continue
            options.append((not self.memory.is_free(_add(step, direction)), direction))
        if not options:
            return self._wander()
        options.sort()
        best = [direction for rank, direction in options if rank == options[0][0]]
        return MOVES[self.rng.choice(best)]

    def _wander(self) -> str:
        free = [d for d in DIRECTIONS if self.memory.is_free(_add(self.memory.position, d))]
        return MOVES[self.rng.choice(free)] if free else "noop"

    def _follow(self, reading: FrameReading, path: list[tuple[int, int]]) -> str:
        """Take the first step of `path`: move, or first clear the way (mine, chop, bridge, fight)."""
        if len(path) < 2:
            return self._wander()
        nxt = path[1]
        obj = self.memory.objects.get(nxt)
        if obj in ("zombie", "skeleton", "cow"):
            return self._interact(reading, nxt, "do")
        if obj is not None:
            return "noop"  # an arrow or a sapling in the way: they move or get replanned around
        material = MATERIALS[self.memory.material(nxt)]
        if self.memory.material(nxt) in WALKABLE:
            return MOVES[(nxt[0] - path[0][0], nxt[1] - path[0][1])]
        if material in MINE_REQUIREMENT:
            return self._interact(reading, nxt, "do")
        if material == "water":
            return self._interact(reading, nxt, "place_stone")
        return self._wander()

    # --- map queries ------------------------------------------------------------------------------------------
    def _adjacent(self, kinds: set[str] | frozenset[str]) -> tuple[int, int] | None:
        for direction in DIRECTIONS:
            cell = _add(self.memory.position, direction)
            if self.memory.objects.get(cell) in kinds:
                return cell
        return None

    def _near(self, material: str, cell: tuple[int, int] | None = None) -> bool:
        """Crafter's crafting test: the material within the 3x3 tiles around the player."""
        x, y = cell or self.memory.position
        block = self.memory.materials[y + ORIGIN - 1 : y + ORIGIN + 2, x + ORIGIN - 1 : x + ORIGIN + 2]
        return bool((block == MATERIAL_CODE[material]).any())

    def _known(self, material: str) -> bool:
        return bool((self.memory.materials == MATERIAL_CODE[material]).any())

    def _can_mine(self, material: str, inventory: dict[str, int]) -> bool:
        tool = MINE_REQUIREMENT[material]
        return tool is None or inventory[tool] > 0

    def _object_mask(self, kind: str) -> np.ndarray:
        mask = np.zeros_like(self.memory.materials, bool)
        for (x, y), obj in self.memory.objects.items():
            if obj == kind:
                mask[y + ORIGIN, x + ORIGIN] = True
        return mask

    def _site_mask(self, materials: tuple[str, ...]) -> np.ndarray:
        """Tiles to stand on with every listed material in their 3x3 neighbourhood."""
        mask = np.ones_like(self.memory.materials, bool)
        for material in materials:
            mask &= _dilate8(self.memory.materials == MATERIAL_CODE[material])
        return mask & np.isin(self.memory.materials, list(WALKABLE))

    def _reachable_furnace_site(self) -> bool:
        return bool(self._site_mask(("table", "furnace")).any())

    # --- path planning ------------------------------------------------------------------------------------------
    def _step_costs(self, inventory: dict[str, int]) -> np.ndarray:
        """Cost of entering each tile: walking 1, unseen 2, mining a way 3, bridging water 5, never lava."""
        materials = self.memory.materials
        costs = np.full(materials.shape, BLOCKED)
        costs[np.isin(materials, list(WALKABLE))] = 1.0
        costs[materials == UNKNOWN] = 2.0
        for material in MINE_REQUIREMENT:
            if self._can_mine(material, inventory):
                costs[materials == MATERIAL_CODE[material]] = 3.0
        if inventory["stone"] >= 1 and inventory["wood_pickaxe"]:
            costs[materials == MATERIAL_CODE["water"]] = 5.0
        lava = materials == MATERIAL_CODE["lava"]
        costs[_dilate4(lava) & (costs < BLOCKED)] += 4.0
        for (x, y), obj in self.memory.objects.items():
            costs[y + ORIGIN, x + ORIGIN] += 3.0 if obj == "cow" else 8.0
            if obj in HOSTILE:
                costs[y + ORIGIN - 1 : y + ORIGIN + 2, x + ORIGIN - 1 : x + ORIGIN + 2] += 4.0
        return costs

    def _path(self, reading: FrameReading, goal: np.ndarray) -> list[tuple[int, int]] | None:
        """Cheapest path (Dijkstra) from the player to any goal tile, as map cells, or None."""
        known = np.argwhere((self.memory.materials != UNKNOWN) | goal)
        (top, left), (bottom, right) = known.min(axis=0) - 3, known.max(axis=0) + 4
        top, left = max(top, 0), max(left, 0)
        bottom, right = min(bottom, MAP_SIZE), min(right, MAP_SIZE)
        width = right - left
        costs = self._step_costs(reading.inventory)[top:bottom, left:right].ravel().tolist()
        goals = goal[top:bottom, left:right].ravel().tolist()
        x, y = self.memory.position
        start = (y + ORIGIN - top) * width + (x + ORIGIN - left)
        size = len(costs)
        distance = [float("inf")] * size
        previous = [-1] * size
        distance[start] = 0.0
        heap = [(0.0, start)]
        while heap:
            cost, index = heappop(heap)
            if cost > distance[index]:
                continue
            if goals[index]:
                return self._cells(previous, index, width, left, top)
            column = index % width
            for neighbour in (
                index - 1 if column > 0 else -1,
                index + 1 if column < width - 1 else -1,
                index - width,
                index + width if index + width < size else -1,
            ):
                if neighbour < 0:
                    continue
                step = costs[neighbour]
                if step >= BLOCKED:
                    continue
                total = cost + step
                if total < distance[neighbour]:
                    distance[neighbour] = total
                    previous[neighbour] = index
                    heappush(heap, (total, neighbour))
        return None

    @staticmethod
    def _cells(previous: list[int], index: int, width: int, left: int, top: int) -> list[tuple[int, int]]:
        cells = []
        while index >= 0:
            cells.append((index % width + left - ORIGIN, index // width + top - ORIGIN))
            index = previous[index]
        return cells[::-1]


class ScriptedPolicy(Policy):
    """The scripted arm: one CrafterPlayer per episode, fresh on every init so a seed fixes the whole episode.

    On close its self-observations (CrafterPlayer.stats) go to the purple log and, with an output directory, to
    `scripted_report.json` there, one entry per episode, which `run` keeps in the arm's report.
    """

    def __init__(self, seed: int = 0, output_dir: Path | None = None) -> None:
        self.seed = seed
        self.output_dir = output_dir
        self.player = CrafterPlayer(seed)
        self.task: str | None = None
        self.observations = 0

    async def init(self, payload: InitPayload) -> AckPayload:
        self.player = CrafterPlayer(self.seed)
        self.task = payload.text
        self.observations = 0
        return AckPayload(message=f"scripted Crafter player ready (seed {self.seed}); reads only the frame")

    async def act(self, payload: ObservationPayload) -> ActionPayload:
        frame = decode_observation(payload.obs)
        self.observations += 1
        return ActionPayload(action_type="env", action=env_action_for(self.player.act(frame)))

    async def close(self) -> None:
        if self.task is None:
            return
        stats = dict(sorted(self.player.stats.items()))
        shown = " ".join(f"{key}={value}" for key, value in stats.items()) or "none"
        log_line(f"scripted episode {self.task!r}: {self.observations} observations; self-observations: {shown}")
        if self.output_dir is not None:
            self._append_to_report(ScriptedEpisode(task=self.task, observations=self.observations, stats=stats))

    def _append_to_report(self, episode: ScriptedEpisode) -> None:
        """Episodes of one purple process close one at a time on its event loop, so read-append-write is safe."""
        assert self.output_dir is not None  # the caller appends only when there is an output dir
        path = self.output_dir / REPORT_NAME
        episodes = []
        if path.exists():
            episodes = ScriptedReport.model_validate_json(path.read_text(encoding="utf-8")).episodes
        episodes.append(episode)
        totals: Counter[str] = Counter()
        for each in episodes:
            totals.update(each.stats)
        write_json_atomic(path, ScriptedReport(seed=self.seed, stats=dict(sorted(totals.items())), episodes=episodes))


def make_policy(options: PurpleOptions) -> Policy:
    return ScriptedPolicy(seed=options.seed, output_dir=options.output_dir)
