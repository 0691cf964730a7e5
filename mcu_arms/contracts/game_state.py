"""The structured state an observation may carry beside (or instead of) its frame: only what the player could know.

An arm chooses what its agent observes with `observe = "frame" | "state" | "frame+state"`. With a state, each
`ObservationPayload` carries a `GameState`: the player's vitals and inventory, the visible window around it as tile
counts and nearest positions, the visible entities with their offsets, what it faces, daylight, the crafting
stations within reach, whether it sleeps, and the simulator's capability list (item names, recipes, skills).

Nothing privileged, ever: no map outside the view, no hidden counters (Crafter's hunger/thirst/fatigue timers), no
creature health, no achievements, no random state. A field a simulator cannot fill is None ("not provided"), never a
guess; an empty list or dict means "provided, and there is none".

Which simulator provides what (the `Field` descriptions below say it field by field):

| field | embedded (Crafter) | mineflayer (Minecraft) | MineStudio |
| --- | --- | --- | --- |
| vitals.health, vitals.food | yes (0-9) | yes (0-20) | not provided: only in the info dict when sent, unverified here |
| vitals.drink, vitals.energy | yes (0-9) | none in Minecraft | none in Minecraft |
| inventory | yes | yes | not provided (its info has slot/type/quantity, not wired) |
| view, adjacent | the 9x7 window the frame shows | exposed blocks (a face open to air or a see-through block) within 16 blocks sideways and 8 up or down: no ore inside the rock, but not ray-traced either | cannot: pixels only (voxels are privileged) |
| entities | creatures, arrows, plants in the window | entities within 24 blocks | cannot: `mobs` is privileged |
| facing, faced | yes | yes (from the yaw; the block and entity at the cursor) | cannot: no ray-cast in its info |
| daylight | yes (the frame's brightness) | from the world time (Minecraft's sky-light curve) | not provided |
| stations_in_reach | the 3x3 rule crafting uses | crafting table / furnace within 4 blocks | cannot |
| sleeping | yes | yes | not provided |
| position, equipment | never (not on screen) | yes (the F3 screen; the armour and hand slots) | equipment only, not wired |
| home | remembered by the simulator for the player: its spawn, then the last table it placed | the spawn, then the last bed or crafting table the bot placed | not provided |
| feasible | never | the sidecar's candidates: skills its library finds possible now | cannot |

On Minecraft, offsets are in blocks: `east` = +x, `south` = +z, `up` = +y.

So MineStudio arms observe frames only; an arm asking MineStudio for a state is refused at plan time.
"""  # noqa: E501 - a markdown table's rows cannot be wrapped

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

GAME_STATE_SCHEMA_VERSION = 1

ObserveMode = Literal["frame", "state", "frame+state"]
OBSERVE_MODES: tuple[ObserveMode, ...] = get_args(ObserveMode)
DEFAULT_OBSERVE: ObserveMode = "frame"  # what upstream's green sends: the frame alone

# How a plan step obtains its item (the plan contract's `method`).
PlanMethod = Literal["collect", "craft", "smelt", "place"]
PLAN_METHODS: tuple[PlanMethod, ...] = get_args(PlanMethod)
# The high-level actions a simulator can carry out for an agent (the planned agent's action runner expands each
# into per-step actions).
Skill = Literal[
    "collect",
    "craft",
    "smelt",
    "place",
    "equip",
    "eat",
    "drink",
    "sleep",
    "fight",
    "flee",
    "go_to",
    "go_home",
    "explore",
    "wait",
    "deposit",
    "withdraw",
]
SKILLS: tuple[Skill, ...] = get_args(Skill)
Direction = Literal["north", "south", "east", "west"]
# How an agent acts on a simulator: per-step env actions only, or also high-level skill requests.
ActionChannel = Literal["env", "skills"]


def wants_frame(observe: ObserveMode) -> bool:
    return observe in ("frame", "frame+state")


def wants_state(observe: ObserveMode) -> bool:
    return observe in ("state", "frame+state")


class _State(BaseModel):
    """Readers ignore fields they do not know, so a newer green's state still reads."""

    model_config = ConfigDict(extra="ignore")


class Gauge(_State):
    value: float
    max: float


class Vitals(_State):
    health: Gauge = Field(description="embedded: 0-9 (the hearts row); mineflayer: 0-20")
    food: Gauge | None = Field(default=None, description="embedded: 0-9; mineflayer: 0-20 hunger bar")
    drink: Gauge | None = Field(default=None, description="embedded only: 0-9 (Minecraft has no thirst)")
    energy: Gauge | None = Field(default=None, description="embedded only: 0-9 (Minecraft has no fatigue)")


class Offset(_State):
    """Where something is relative to the player, in tiles/blocks. Crafter's map is flat, so `up` is None there."""

    east: int
    south: int
    up: int | None = None


class TileSummary(_State):
    count: int = Field(description="tiles of this kind visible in the window")
    nearest: Offset = Field(description="the nearest one (fewest steps; ties: north first, then west)")
    distance: int = Field(description="steps to it: |east| + |south| (+ |up|)")


class View(_State):
    width: int
    height: int
    hidden: int = Field(default=0, description="tiles of the window too dark to make out (the corners on a dark night)")
    tiles: dict[str, TileSummary] = Field(description="per tile kind (grass, tree, water, table, void...)")


class Entity(_State):
    kind: str = Field(
        description="embedded: cow, zombie, skeleton, arrow, plant, ripe_plant; mineflayer: the entity name"
    )
    offset: Offset
    distance: int
    hostile: bool = Field(description="it attacks the player (zombie, skeleton, and arrows in flight)")


class Faced(_State):
    tile: str = Field(description="the tile kind in front of the player")
    entity: str | None = Field(default=None, description="the entity on it, if any")


class Position(_State):
    """An absolute position: only where the simulator shows it to the player (Minecraft's F3 screen)."""

    x: float
    y: float
    z: float


class Recipe(_State):
    """How one item is obtained: what a plan step with this `method` and `item` needs."""

    method: PlanMethod
    item: str = Field(description="what it yields: an inventory item, a vital (drink, food) or the placed block")
    source: str | None = Field(default=None, description="collect: the tile or entity kind it comes from")
    consumes: dict[str, int] = Field(default_factory=dict, description="inventory items used up")
    requires: dict[str, int] = Field(default_factory=dict, description="inventory items needed but kept (a pickaxe)")
    stations: list[str] = Field(default_factory=list, description="must be within reach (table, furnace)")
    placed_on: list[str] = Field(default_factory=list, description="place: the tile kinds it can be put on")
    yields: int = 1


class Capabilities(_State):
    """What the simulator can do for an agent, the same every step: the names a plan is validated against."""

    simulator: str
    keymap: Literal["crafter"] | None = Field(
        default=None, description="how skills become per-step env actions (contracts/crafter_keymap.py)"
    )
    actions: ActionChannel = Field(
        default="env", description='"skills": the simulator also takes skill requests (contracts/skills.py)'
    )
    items: list[str] = Field(description="every inventory item name")
    inventory_cap: int | None = Field(default=None, description="the most of one item the inventory holds")
    skills: list[Skill]
    recipes: list[Recipe]
    aliases: dict[str, str] = Field(
        default_factory=dict, description="other names (Minecraft's) for items, mapped to this simulator's names"
    )
    walkable: list[str] = Field(description="tile kinds the player can walk on (mineflayer: path-finding decides)")
    hostile: list[str] = Field(description="entity kinds that attack the player")
    foods: dict[str, int] = Field(default_factory=dict, description="items the player can eat, by the food they give")


class GameState(_State):
    """One observation's structured state. See the module docstring for which simulator provides which field."""

    schema_version: int = GAME_STATE_SCHEMA_VERSION
    simulator: str
    vitals: Vitals
    inventory: dict[str, int] = Field(description="items held, count > 0 only")
    view: View | None = Field(default=None, description="None while sleeping: the frame shows a greyed view")
    adjacent: dict[Direction, str] | None = Field(default=None, description="the four neighbouring tiles")
    entities: list[Entity] | None = Field(default=None, description="visible ones, nearest first")
    facing: Offset
    faced: Faced | None = None
    daylight: float | None = Field(default=None, description="1 full day, 0 darkest night")
    stations_in_reach: list[str] | None = Field(
        default=None, description="crafting stations near enough to craft with (Crafter: the 3x3 around the player)"
    )
    sleeping: bool | None = None
    position: Position | None = Field(default=None, description="embedded: never (not on screen); mineflayer: yes")
    equipment: dict[str, str] | None = Field(default=None, description="embedded: none (tools sit in the inventory)")
    home: Offset | None = Field(
        default=None,
        description="where home is from here, as the player remembers it: the last bed or crafting table it placed, "
        "else where it spawned (None: the simulator keeps no home)",
    )
    feasible: list[str] | None = Field(
        default=None, description="mineflayer: `kind:arg` skills its library finds possible now (craft:stick, ...)"
    )
    capabilities: Capabilities | None = None

    def count(self, item: str) -> int:
        return self.inventory.get(item, 0)
