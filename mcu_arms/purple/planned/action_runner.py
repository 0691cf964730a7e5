"""The action runner: which high-level actions fit the moment, and how each becomes simulator actions.

It reads the structured state only (contracts/game_state.py), never the frame. It offers candidates at decision
points, the one it would pick itself first (the safe fallback when the policy's answer is unusable), and runs the
chosen one until it is done, fails, or is interrupted. How it acts depends on the simulator's capability list: on
Crafter's keymap (`keymap = "crafter"`, contracts/crafter_keymap.py) an action is a run of per-step key actions
(the classes below); on a simulator that takes skills (`actions = "skills"`, the mineflayer one) it is one skill
request (skills.py). Either way success is judged from the inventory delta the state shows, never from the
action's own account: a chop that "worked" without wood in the inventory failed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mcu_arms.contracts.game_state import Capabilities, Direction, GameState, Recipe, Skill
from mcu_arms.contracts.planned import PlanStep
from mcu_arms.contracts.skills import SkillOutcome
from mcu_arms.contracts.trajectory import ActionStatus, CandidateAction
from mcu_arms.purple.planned.running import BLAST_RADIUS, EXPLODING, Outcome, RunningAction, held_items, slot_for

MOVES: dict[Direction, str] = {"north": "move_up", "south": "move_down", "east": "move_right", "west": "move_left"}
STEPS: dict[Direction, tuple[int, int]] = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
INTERACT = "do"
PROJECTILES = frozenset({"arrow"})  # hostile, but nothing to fight
THREAT_RADIUS = 4  # a hostile creature this close (steps) is a threat
ARROW_RADIUS = 2
# Creatures that explode: never fought in melee, kept beyond their blast (a Minecraft creeper's explosion hurts out to
# about 6 blocks; its fuse starts within 3).
HOME_REACHED = 1  # steps from home that count as home
DRINK_BELOW, FOOD_BELOW, ENERGY_BELOW = 0.4, 0.4, 0.25  # of the vital's maximum: look after it now
FOOD_HUNT_BELOW = 0.25  # below this, go looking for food even when none is in view
FOOD_STOCK_BELOW = 0.75  # the food stock: below this, food in view is taken on the way (embedded: the food vital)
FOOD_STOCK_ITEMS = 4  # the food stock on Minecraft: this many food items held
FOOD_ANIMALS = ("cow", "pig", "sheep", "chicken", "rabbit")  # Minecraft: hunted for the stock
RESUME_HEALTH = 0.5  # of the maximum: work resumes after a threat only from here up
MAX_PREREQUISITES = 4  # how deep "to craft X, first get Y" may go
EXPLORE_STEPS = 14
FLEE_STEPS = 6
WAIT_STEPS = 30
IDLE_INTERACTIONS = 8  # this many interactions in a row without a gain and the action gave up


def _vital(state: GameState, name: str) -> tuple[float, float] | None:
    gauge = getattr(state.vitals, name, None)
    return (gauge.value, gauge.max) if gauge is not None else None


def _offset(offset) -> tuple[int, int]:
    return offset.east, offset.south


def _facing(state: GameState) -> tuple[int, int]:
    return _offset(state.facing)


# Where an item is worn (Mineflayer's equip destinations, the state's equipment keys): put on when held, not worn.
def threat_radius(kind: str) -> int:
    """How near (steps) a hostile of this kind is a threat: an exploding one from beyond its blast."""
    if kind in PROJECTILES:
        return ARROW_RADIUS
    return BLAST_RADIUS if kind in EXPLODING else THREAT_RADIUS


def _direction_to(target: tuple[int, int]) -> Direction:
    east, south = target
    if abs(east) >= abs(south):
        return "east" if east > 0 else "west"
    return "south" if south > 0 else "north"


class Navigator:
    """Greedy steps towards a target offset over the walkable neighbours, sidestepping what blocks the way."""

    def __init__(self, capabilities: Capabilities, rng: random.Random) -> None:
        self.walkable = set(capabilities.walkable)
        self.rng = rng

    def free(self, state: GameState, direction: Direction) -> bool:
        if state.adjacent is None or state.adjacent.get(direction) not in self.walkable:
            return False
        occupied = {_offset(entity.offset) for entity in state.entities or []}
        return STEPS[direction] not in occupied

    def toward(self, state: GameState, target: tuple[int, int]) -> str | None:
        """The move that brings the player next to `target` and facing it; None once it is faced."""
        east, south = target
        if abs(east) + abs(south) == 1:
            direction = _direction_to(target)
            return None if _facing(state) == STEPS[direction] else MOVES[direction]  # a blocked move only turns
        preferred: list[Direction] = []
        if east:
            preferred.append("east" if east > 0 else "west")
        if south:
            preferred.append("south" if south > 0 else "north")
        if abs(south) > abs(east):
            preferred.reverse()
        for direction in preferred:
            if self.free(state, direction):
                return MOVES[direction]
        sidesteps = [d for d in STEPS if d not in preferred and self.free(state, d)]
        if sidesteps:
            return MOVES[self.rng.choice(sidesteps)]
        return MOVES[preferred[0]] if preferred else None

    def away_from(self, state: GameState, threats: list[tuple[int, int]]) -> str:
        def score(direction: Direction) -> int:
            step = STEPS[direction]
            return sum(abs(e - step[0]) + abs(s - step[1]) for e, s in threats)

        options = [d for d in STEPS if self.free(state, d)]
        if not options:
            return "noop"
        best = max(score(d) for d in options)
        return MOVES[self.rng.choice([d for d in options if score(d) == best])]


class Collect(RunningAction):
    """Go to the nearest source (a tile or a creature) and interact until the inventory holds `count`."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.recipe = self.action_runner.recipe("collect", self.candidate.target or "")
        self.idle = 0
        self.last_held = held_items(self.before).get(self.recipe.item, 0)

    def act(self, state: GameState) -> str | Outcome:
        item = self.recipe.item
        held = held_items(state).get(item, 0)
        if held > self.last_held:
            self.idle = 0
        self.last_held = held
        vital = _vital(state, item)
        wanted = vital[1] if vital is not None else (self.candidate.count or 1)
        if held >= wanted:
            return self.finish(state, "succeeded", f"{item} {held} held")
        missing = self.action_runner.missing(self.recipe.requires, state)
        if missing:
            return self.finish(state, "failed", f"needs {missing}")
        if self.idle >= IDLE_INTERACTIONS:
            return self.settle(state, f"{IDLE_INTERACTIONS} interactions without {item}")
        source = self.recipe.source or ""
        faced = state.faced
        if faced is not None and source in (faced.entity, faced.tile if faced.entity is None else None):
            self.idle += 1
            return INTERACT
        target = self.action_runner.nearest(state, source)
        if target is None:
            return self.settle(state, f"no {source} in view")
        if target == (0, 0):  # standing on it (grass): step off, facing more of it
            free = [d for d in STEPS if self.navigator.free(state, d)]
            return MOVES[self.navigator.rng.choice(free)] if free else self.settle(state, f"no way to face a {source}")
        move = self.navigator.toward(state, target)
        if move is not None:
            return move
        self.idle += 1
        return INTERACT

    def timed_out_status(self, state: GameState) -> ActionStatus:
        return "succeeded" if self.gained(state, self.recipe.item) > 0 else "failed"

    def settle(self, state: GameState, detail: str) -> Outcome:
        return self.finish(state, self.timed_out_status(state), detail)


class Craft(RunningAction):
    side_effects = True

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.recipe = self.action_runner.recipe("craft", self.candidate.target or "")

    def act(self, state: GameState) -> str | Outcome:
        item = self.recipe.item
        if self.steps:
            if self.gained(state, item) > 0:
                return self.finish(state, "succeeded", f"{item} {state.count(item)} held")
            return self.finish(state, "failed", f"no {item} came of it")
        absent = [s for s in self.recipe.stations if s not in (state.stations_in_reach or [])]
        if absent:
            return self.finish(state, "failed", f"no {', '.join(absent)} within reach")
        missing = self.action_runner.missing(self.recipe.consumes, state)
        if missing:
            return self.finish(state, "failed", f"needs {missing}")
        return f"make_{item}"


class Place(RunningAction):
    side_effects = True

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.recipe = self.action_runner.recipe("place", self.candidate.target or "")
        self.placed = False

    def act(self, state: GameState) -> str | Outcome:
        item = self.recipe.item
        if self.placed:
            spent = all(self.gained(state, c) <= -n for c, n in self.recipe.consumes.items())
            faced_tile = state.faced.tile if state.faced is not None else None
            if spent and (faced_tile == item or item in (state.stations_in_reach or [])):
                return self.finish(state, "succeeded", f"{item} placed")
            return self.finish(state, "failed", f"no {item} came of it")
        missing = self.action_runner.missing(self.recipe.consumes, state)
        if missing:
            return self.finish(state, "failed", f"needs {missing}")
        faced = state.faced
        if faced is not None and faced.tile in self.recipe.placed_on and faced.entity is None:
            self.placed = True
            return f"place_{item}"
        free = [d for d in STEPS if self.navigator.free(state, d)]
        if not free:
            return self.finish(state, "failed", f"nowhere to put the {item}")
        return MOVES[self.navigator.rng.choice(free)]  # the tile beyond becomes the faced one


class GoTo(RunningAction):
    def act(self, state: GameState) -> str | Outcome:
        kind = self.candidate.target or ""
        target = self.action_runner.nearest(state, kind)
        if target is None:
            return self.finish(state, "failed", f"no {kind} in view")
        move = self.navigator.toward(state, target)
        return move if move is not None else self.finish(state, "succeeded", f"next to the {kind}")


class Explore(RunningAction):
    """Walk one way (turning when blocked) until the wanted kind comes into view."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.budget = EXPLORE_STEPS
        self.heading: Direction = self.navigator.rng.choice(list(STEPS))

    def act(self, state: GameState) -> str | Outcome:
        kind = self.candidate.target
        if kind and self.steps and self.action_runner.nearest(state, kind) is not None:
            return self.finish(state, "succeeded", f"{kind} in view")
        if not self.navigator.free(state, self.heading):
            options = [d for d in STEPS if self.navigator.free(state, d)]
            if not options:
                return self.finish(state, "failed", "walled in")
            self.heading = self.navigator.rng.choice(options)
        return MOVES[self.heading]

    def timed_out_status(self, state: GameState) -> ActionStatus:
        return "succeeded" if not self.candidate.target else "failed"


class Sleep(RunningAction):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.slept = False

    def act(self, state: GameState) -> str | Outcome:
        energy = _vital(state, "energy")
        if state.sleeping:
            self.slept = True
        elif self.slept or (energy is not None and energy[0] >= energy[1]):
            status: ActionStatus = "succeeded" if self.gained(state, "energy") > 0 else "failed"
            return self.finish(state, status, "awake")
        return "sleep"


class GoHome(RunningAction):
    """Back to where home is remembered (the state's `home`), when a threat or the night calls for it."""

    def act(self, state: GameState) -> str | Outcome:
        if state.home is None:
            return self.finish(state, "failed", "no home remembered")
        target = _offset(state.home)
        if abs(target[0]) + abs(target[1]) <= HOME_REACHED:
            return self.finish(state, "succeeded", "home")
        move = self.navigator.toward(state, target)
        return move if move is not None else self.finish(state, "succeeded", "home")

    def timed_out_status(self, state: GameState) -> ActionStatus:
        return "failed"


class Fight(RunningAction):
    def act(self, state: GameState) -> str | Outcome:
        kind = self.candidate.target or ""
        target = self.action_runner.nearest(state, kind)
        if target is None or abs(target[0]) + abs(target[1]) > THREAT_RADIUS + 2:
            return self.finish(state, "succeeded", f"no {kind} near any more")
        move = self.navigator.toward(state, target)
        return move if move is not None else INTERACT


class Flee(RunningAction):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.budget = FLEE_STEPS

    def act(self, state: GameState) -> str | Outcome:
        threats = self.action_runner.threats(state)
        if self.steps and not threats:
            return self.finish(state, "succeeded", "out of reach")
        return self.navigator.away_from(state, threats)

    def timed_out_status(self, state: GameState) -> ActionStatus:
        return "failed" if self.action_runner.threats(state) else "succeeded"


class Wait(RunningAction):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.budget = WAIT_STEPS

    def act(self, state: GameState) -> str | Outcome:
        if self.gained(state, "health") > 0:
            return self.finish(state, "succeeded", "health regained")
        return "noop"


ACTIONS: dict[str, type[RunningAction]] = {
    "collect": Collect,
    "eat": Collect,
    "drink": Collect,
    "craft": Craft,
    "place": Place,
    "go_to": GoTo,
    "go_home": GoHome,
    "explore": Explore,
    "sleep": Sleep,
    "fight": Fight,
    "flee": Flee,
    "wait": Wait,
}


@dataclass
class ActionRunner:
    """Offers candidates for the moment and starts the chosen one; knows the simulator only by its capabilities."""

    capabilities: Capabilities
    rng: random.Random
    navigator: Navigator = field(init=False)
    last_skill: SkillOutcome | None = None  # what the simulator said of the last skill (skill simulators only)

    def __post_init__(self) -> None:
        self.skills = self.capabilities.actions == "skills"
        if self.capabilities.keymap != "crafter" and not self.skills:
            raise ValueError(
                f"the {self.capabilities.simulator} simulator has no keymap this action runner speaks "
                f"({self.capabilities.keymap!r}; it speaks 'crafter') and takes no skills"
            )
        self.navigator = Navigator(self.capabilities, self.rng)
        self._recipes: dict[tuple[str, str], Recipe] = {
            (recipe.method, recipe.item): recipe for recipe in self.capabilities.recipes
        }

    # --- what the state shows ------------------------------------------------------------------------------------
    def recipe(self, method: str, item: str) -> Recipe:
        return self._recipes[(method, item)]

    def obtained_by(self, item: str) -> Recipe | None:
        return next((r for r in self.capabilities.recipes if r.item == item and r.method != "place"), None)

    @staticmethod
    def home_beyond_blast(state: GameState) -> bool:
        """Home is a refuge from a creature that explodes only when it lies beyond the blast from it: going home next
        to a creeper (it spawned there, or followed) keeps the agent inside its blast."""
        if state.home is None:
            return False
        for entity in state.entities or []:
            if entity.kind in EXPLODING:
                east, south = _offset(entity.offset)
                if abs(state.home.east - east) + abs(state.home.south - south) <= BLAST_RADIUS:
                    return False
        return True

    @staticmethod
    def away_from_home(state: GameState) -> bool:
        return state.home is not None and abs(state.home.east) + abs(state.home.south) > HOME_REACHED

    @staticmethod
    def missing(needed: dict[str, int], state: GameState) -> str:
        return ", ".join(f"{item} {count}" for item, count in needed.items() if state.count(item) < count)

    @staticmethod
    def nearest(state: GameState, kind: str) -> tuple[int, int] | None:
        """The nearest tile of this kind, or the nearest entity of it."""
        entity = next((e for e in state.entities or [] if e.kind == kind), None)
        if entity is not None:
            return _offset(entity.offset)
        if state.view is not None and kind in state.view.tiles:
            return _offset(state.view.tiles[kind].nearest)
        return None

    def threats(self, state: GameState) -> list[tuple[int, int]]:
        return [_offset(e.offset) for e in state.entities or [] if e.hostile and e.distance <= threat_radius(e.kind)]

    def threatened(self, state: GameState) -> bool:
        return bool(self.threats(state))

    def healthy(self, state: GameState) -> bool:
        health = state.vitals.health
        return health.value >= RESUME_HEALTH * health.max

    # --- candidates ----------------------------------------------------------------------------------------------
    def for_step(self, step: PlanStep, state: GameState) -> list[CandidateAction]:
        """What serves this plan step now, prerequisites first (to craft a pickaxe, first a table within reach)."""
        return self._obtain(step.method, step.item, step.count, state, depth=0)

    def _obtain(self, method: str, item: str, count: int, state: GameState, depth: int) -> list[CandidateAction]:
        recipe = self._recipes.get((method, item))
        if recipe is None or depth > MAX_PREREQUISITES:
            return [self._explore(None)]
        for part, amount in {**recipe.requires, **recipe.consumes}.items():
            if state.count(part) < amount:
                source = self.obtained_by(part)
                if source is None:
                    return [self._explore(None)]
                return self._obtain(source.method, part, amount, state, depth + 1)
        if method == "collect":
            return self._collect(recipe, count, state)
        if method in ("craft", "smelt"):
            for station in recipe.stations:
                if station not in (state.stations_in_reach or []):
                    return self._station(station, state, depth)
        return [self._candidate(method, item, count)]  # type: ignore[arg-type]

    def _collect(self, recipe: Recipe, count: int, state: GameState) -> list[CandidateAction]:
        source = recipe.source or ""
        if self.nearest(state, source) is None:
            return [self._explore(source)]
        return [self._candidate("collect", recipe.item, count, source=source), self._explore(source)]

    def _station(self, station: str, state: GameState, depth: int) -> list[CandidateAction]:
        offered = []
        if self.nearest(state, station) is not None:
            offered.append(self._candidate("go_to", station))
        offered += [
            c for c in self._obtain("place", station, 1, state, depth + 1) if c.id not in {o.id for o in offered}
        ]
        return offered

    def survival(self, state: GameState) -> list[CandidateAction]:
        """Vitals that need looking after now, the most pressing first."""
        offered: list[tuple[float, CandidateAction]] = []
        vitals: tuple[tuple[str, float, Skill], ...] = (("drink", DRINK_BELOW, "drink"), ("food", FOOD_BELOW, "eat"))
        for vital, below, skill in vitals:
            level = _vital(state, vital)
            recipe = self._recipes.get(("collect", vital))
            if level is None or recipe is None or level[0] > below * level[1]:
                continue
            source = recipe.source or ""
            if self.nearest(state, source) is not None:
                offered.append((level[0] / level[1], self._candidate(skill, vital, source=source)))
            elif vital == "drink" or level[0] <= FOOD_HUNT_BELOW * level[1]:
                offered.append((level[0] / level[1] + 0.01, self._explore(source)))
        food, foods = _vital(state, "food"), self.capabilities.foods
        held = [name for name in foods if state.count(name)]
        if food is not None and held and food[0] <= FOOD_BELOW * food[1]:
            offered.append((food[0] / food[1], self._candidate("eat", max(held, key=foods.__getitem__))))
        stock = self._food_stock(state)
        if stock is not None and not self.threatened(state) and stock.id not in {c.id for _, c in offered}:
            offered.append((FOOD_STOCK_BELOW, stock))
        offered += [(FOOD_STOCK_BELOW + 0.1, candidate) for candidate in self._gear(state)]
        energy = _vital(state, "energy")
        hostile_in_view = any(entity.hostile for entity in state.entities or [])
        if energy is not None and energy[0] <= ENERGY_BELOW * energy[1] and (not hostile_in_view or energy[0] <= 0):
            offered.append(
                (energy[0] / energy[1], self._candidate("sleep", None))
            )  # a sleeper is hit hard (Crafter: 7)
        return [candidate for _, candidate in sorted(offered, key=lambda pair: pair[0])]

    def _gear(self, state: GameState) -> list[CandidateAction]:
        """Protective gear held but not worn (a shield for the off-hand, armour): put it on. Only where the state
        shows the equipment, which judges the equip afterwards."""
        if state.equipment is None or "equip" not in self.capabilities.skills:
            return []
        worn = set(state.equipment.values())
        return [
            self._candidate("equip", item)
            for item in sorted(state.inventory)
            if slot_for(item) != "hand" and item not in worn
        ]

    def _food_stock(self, state: GameState) -> CandidateAction | None:
        """Food taken on the way while it is in view, so that hunger never finds the player empty-handed: on Crafter
        the food vital below FOOD_STOCK_BELOW with a cow in view; on Minecraft fewer than FOOD_STOCK_ITEMS food items
        held with a food animal in view."""
        food = _vital(state, "food")
        recipe = self._recipes.get(("collect", "food"))
        if recipe is not None and food is not None:
            source = recipe.source or ""
            if food[0] < FOOD_STOCK_BELOW * food[1] and self.nearest(state, source) is not None:
                return self._candidate(
                    "eat", "food", source=source, description=f"stock up: eat from the nearest {source}"
                )
            return None
        if (
            not self.capabilities.foods
            or sum(state.count(name) for name in self.capabilities.foods) >= FOOD_STOCK_ITEMS
        ):
            return None
        animal = next((e.kind for e in state.entities or [] if e.kind in FOOD_ANIMALS), None)
        if animal is None:
            return None
        return self._candidate("fight", animal, description=f"stock up on food: hunt the nearest {animal}")

    def threat(self, state: GameState) -> list[CandidateAction]:
        """Fight the nearest hostile or flee (flee first when hurt, or when one explodes: never fought), or go home."""
        kinds = []
        for entity in state.entities or []:
            if entity.hostile and entity.kind not in PROJECTILES and entity.kind not in kinds:
                kinds.append(entity.kind)
        fights = [self._candidate("fight", kind) for kind in kinds if kind not in EXPLODING]
        flee = [self._candidate("flee", None)]
        refuge = self.away_from_home(state) and self.home_beyond_blast(state)
        home = [self._candidate("go_home", None)] if refuge else []
        if self.healthy(state) and not EXPLODING & set(kinds):
            return fights + flee + home
        return flee + home + fights

    def recovery(self, state: GameState) -> list[CandidateAction]:
        return self.survival(state) + [self._candidate("wait", None)]

    def explore(self) -> list[CandidateAction]:
        return [self._explore(None)]

    def _explore(self, kind: str | None) -> CandidateAction:
        return self._candidate("explore", kind)

    def _candidate(
        self,
        skill: Skill,
        target: str | None,
        count: int | None = None,
        *,
        source: str | None = None,
        description: str | None = None,
    ) -> CandidateAction:
        words = {
            "collect": f"collect {target} from the nearest {source} until {count} held",
            "eat": f"eat: hit the nearest {source} for {target}" if source else f"eat a {target}",
            "smelt": f"smelt {target} in the furnace within reach",
            "equip": f"equip the {target} ({slot_for(target or '')})",
            "drink": f"drink from the nearest {source}",
            "craft": f"craft {target}",
            "place": f"place a {target} in front",
            "go_to": f"go to the nearest {target}",
            "explore": f"explore until a {target} is in view" if target else "explore unseen ground",
            "sleep": "sleep until rested (dangerous with hostiles near)",
            "fight": f"fight the nearest {target}",
            "flee": "move away from the hostiles (beyond a creeper's blast)",
            "go_home": "go home: back to the last bed or table placed, else the spawn",
            "deposit": f"put {target} into the nearest chest",
            "withdraw": f"take {target} out of the nearest chest",
            "wait": "stand still until health regrows",
        }
        named = source if source and skill in ("eat", "drink") else target
        identifier = skill if target is None else f"{skill}_{named}"
        return CandidateAction(
            id=identifier, skill=skill, target=target, count=count, description=description or words[skill]
        )

    def start(self, candidate: CandidateAction, state: GameState, step: int) -> RunningAction:
        if self.skills:
            from mcu_arms.purple.planned.skills import SkillAction

            return SkillAction(candidate, self, state, step)
        return ACTIONS[candidate.skill](candidate, self, state, step)
