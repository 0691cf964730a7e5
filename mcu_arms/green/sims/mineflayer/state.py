"""The sidecar's `observe` and `capabilities` answers as the GameState contract (contracts/game_state.py).

Offsets are in blocks (east = +x, south = +z, up = +y) and distances in steps (|east| + |south| + |up|), as the
contract counts them. The facing comes from the yaw (Minecraft's: 0 looks north, towards -z; the view vector is
(-sin yaw, -cos yaw) on x and z); daylight from the world time by Minecraft's own sky-light curve.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from mcu_arms.contracts.game_state import (
    Capabilities,
    Entity,
    Faced,
    GameState,
    Gauge,
    Offset,
    Position,
    Recipe,
    Skill,
    TileSummary,
    View,
    Vitals,
)
from mcu_arms.contracts.mineflayer import ALIASES

VITAL_MAX = 20.0
TICKS_PER_DAY = 24000
# What the planned agent's executor can ask of this backend (each becomes one skill request).
MINEFLAYER_SKILLS: tuple[Skill, ...] = (
    "collect",
    "craft",
    "smelt",
    "place",
    "equip",
    "eat",
    "fight",
    "flee",
    "go_to",
    "go_home",
    "explore",
    "wait",
    "deposit",
    "withdraw",
)


def whole_count(raw: Any) -> int | None:
    """An inventory count as an integer: a whole number as text ("10") or as a float (10.0) is converted; anything
    else (negative, fractional, not a number) cannot be read and is None. Never summed as text."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() and raw >= 0 else None
    if isinstance(raw, str) and re.fullmatch(r"\s*\d+\s*", raw):
        return int(raw)
    return None


def whole_counts(counts: dict[str, Any], quirks: Counter[str]) -> dict[str, int]:
    """The inventory with integer counts; each count that was not an integer is a server quirk, counted by kind
    (converted, or left out when it cannot be read)."""
    held = {}
    for name, raw in counts.items():
        count = whole_count(raw)
        if count is None or not isinstance(raw, int) or isinstance(raw, bool):
            quirks["server_quirk.count_converted" if count is not None else "server_quirk.count_unreadable"] += 1
        if count:
            held[name] = count
    return held


def capabilities_from(answer: dict[str, Any]) -> Capabilities:
    items = list(answer["items"])
    known = set(items)
    return Capabilities(
        simulator="mineflayer",
        actions="skills",
        items=items,
        skills=list(MINEFLAYER_SKILLS),
        recipes=[Recipe.model_validate(recipe) for recipe in answer["recipes"]],
        aliases={name: item for name, item in sorted(ALIASES.items()) if item in known},
        walkable=list(answer["walkable"]),
        hostile=list(answer["hostile"]),
        foods={name: int(points) for name, points in answer["foods"].items()},
    )


def daylight(time_of_day: int) -> float:
    """Minecraft's sky brightness at this time of day: 1 from morning to evening, 0 at midnight."""
    celestial = (time_of_day / TICKS_PER_DAY - 0.25) % 1.0
    adjusted = celestial + (1.0 - (math.cos(celestial * math.pi) + 1.0) / 2.0 - celestial) / 3.0
    return min(1.0, max(0.0, math.cos(adjusted * 2.0 * math.pi) * 2.0 + 0.5))


def facing(yaw: float) -> Offset:
    east, south = -math.sin(yaw), -math.cos(yaw)
    if abs(east) > abs(south):
        return Offset(east=1 if east > 0 else -1, south=0)
    return Offset(east=0, south=1 if south > 0 else -1)


def _offset(xyz: list[float]) -> Offset:
    dx, dy, dz = (round(value) for value in xyz)
    return Offset(east=dx, south=dz, up=dy)


def _steps(offset: Offset) -> int:
    return abs(offset.east) + abs(offset.south) + abs(offset.up or 0)


def game_state(observed: dict[str, Any], capabilities: Capabilities, quirks: Counter[str] | None = None) -> GameState:
    hostile = set(capabilities.hostile)
    sideways = int(observed["sideways"])
    tiles = {
        name: TileSummary(count=seen["count"], nearest=_offset(seen["offset"]), distance=seen["distance"])
        for name, seen in sorted(observed["blocks"].items())
    }
    entities = []
    for seen in observed["entities"]:
        offset = _offset(seen["offset"])
        entities.append(
            Entity(
                kind=seen["name"],
                offset=offset,
                distance=_steps(offset),
                hostile=seen["kind"] == "hostile" or seen["name"] in hostile,
            )
        )
    entities.sort(key=lambda entity: (entity.distance, entity.offset.south, entity.offset.east))
    faced = observed.get("faced")
    x, y, z = observed["position"]
    home = observed.get("home")
    time_of_day = observed.get("time_of_day")
    return GameState(
        simulator="mineflayer",
        vitals=Vitals(
            health=Gauge(value=observed["health"], max=VITAL_MAX), food=Gauge(value=observed["food"], max=VITAL_MAX)
        ),
        inventory=whole_counts(observed["inventory"], quirks if quirks is not None else Counter()),
        view=View(width=2 * sideways + 1, height=2 * sideways + 1, tiles=tiles),
        adjacent={direction: name for direction, name in observed["adjacent"].items() if name is not None},
        entities=entities,
        facing=facing(observed["yaw"]),
        faced=Faced(tile=faced["block"], entity=faced.get("entity")) if faced else None,
        daylight=round(daylight(time_of_day), 3) if time_of_day is not None else None,
        stations_in_reach=list(observed["stations"]),
        sleeping=bool(observed["sleeping"]),
        position=Position(x=x, y=y, z=z),
        equipment=dict(observed["equipment"]),
        home=_offset([home[0] - x, home[1] - y, home[2] - z]) if home else None,
        feasible=observed.get("feasible"),
        capabilities=capabilities,
    )
