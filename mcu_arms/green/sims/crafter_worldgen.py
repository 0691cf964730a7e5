"""Crafter's world generation: the same world draw for draw, in half the time.

crafter.worldgen spends ~60 ms a world mostly around its noise (a partial, a dict and two Python calls per noise
value, 28,000 of them) and in numpy scalar arithmetic per tile: ~60 ms of every episode's reset, on its critical path.
Here each tile's terrain is decided by the same conditions in the same order, with the same noise values (the same
opensimplex calls, the same arguments), the same floating-point operations and the same draws from the world's RNG;
the distances to the player and the spawn sigmoid are computed for the whole area at once (numpy's element-wise sqrt
and exp give each element what its scalar call gives). tests/test_embedded_sim.py compares the two generators world
for world, object for object, and the RNG state they leave.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import opensimplex
from crafter import constants, engine, objects


def generate_world(world: engine.World, player: objects.Player) -> None:
    """What crafter.worldgen.generate_world makes of `world` (freshly reset) around `player`."""
    noise3 = opensimplex.OpenSimplex(seed=world.random.randint(0, 2**31 - 1)).noise3
    width, height = world.area
    dx = np.arange(width)[:, None] - player.pos[0]
    dy = np.arange(height)[None, :] - player.pos[1]
    distance = np.sqrt(dx**2 + dy**2)
    start = 4 - distance
    start += np.array([[2 * noise3(x / 3, y / 3, 8) for y in range(height)] for x in range(width)])
    start = 1 / (1 + np.exp(-start))
    tunnels = np.zeros(world.area, bool)
    uniform = world.random.uniform
    materials: dict[tuple[int, int], str] = {}  # what was just set, instead of reading it back from the world
    for x in range(width):
        for y in range(height):
            world[x, y] = materials[x, y] = _material(x, y, float(start[x, y]), noise3, uniform, tunnels)
    walkable = constants.walkable
    for x in range(width):
        for y in range(height):
            if (material := materials[x, y]) in walkable:
                _place_object(world, (x, y), player, material, float(distance[x, y]), bool(tunnels[x, y]), uniform)


def _material(
    x: int,
    y: int,
    start: float,
    noise3: Callable[[float, float, int], float],
    uniform: Callable[[], float],
    tunnels: np.ndarray,
) -> str:
    """The tile's material, by crafter's conditions in crafter's order (each draw only where crafter draws; a noise
    value only where a condition reads it: noise draws nothing). crafter's noise of octaves {size: weight} is
    sum(weight * noise3(x / size, y / size, z)) / sum(weights), written out here (one octave: the value itself)."""
    if start > 0.5:
        return "grass"
    water = noise3(x / 15, y / 15, 3) + 0.15 * noise3(x / 5, y / 5, 3) + 0.1
    water -= 2 * start
    mountain = (noise3(x / 15, y / 15, 0) + 0.3 * noise3(x / 5, y / 5, 0)) / (1 + 0.3)
    mountain -= 4 * start + 0.3 * water
    if mountain > 0.15:
        if noise3(x / 7, y / 7, 6) > 0.15 and mountain > 0.3:  # cave
            return "path"
        if noise3(2 * x / 3, y / 5 / 3, 7) > 0.4 or noise3(x / 5 / 3, 2 * y / 3, 7) > 0.4:  # tunnels
            tunnels[x, y] = True
            return "path"
        if noise3(x / 8, y / 8, 1) > 0 and uniform() > 0.85:
            return "coal"
        if noise3(x / 6, y / 6, 2) > 0.4 and uniform() > 0.75:
            return "iron"
        if mountain > 0.18 and uniform() > 0.994:
            return "diamond"
        if mountain > 0.3 and noise3(x / 5, y / 5, 6) > 0.35:
            return "lava"
        return "stone"
    if 0.25 < water <= 0.35 and noise3(x / 9, y / 9, 4) > -0.2:
        return "sand"
    if 0.3 < water:
        return "water"
    if noise3(x / 7, y / 7, 5) > 0 and uniform() > 0.8:
        return "tree"
    return "grass"


def _place_object(
    world: engine.World,
    pos: tuple[int, int],
    player: objects.Player,
    material: str,
    distance: float,
    tunnel: bool,
    uniform: Callable[[], float],
) -> None:
    """A cow, zombie or skeleton on a walkable tile, by crafter's conditions and draws."""
    if distance > 3 and material == "grass" and uniform() > 0.985:
        world.add(objects.Cow(world, pos))
    elif distance > 10 and uniform() > 0.993:
        world.add(objects.Zombie(world, pos, player))
    elif material == "path" and tunnel and uniform() > 0.95:
        world.add(objects.Skeleton(world, pos, player))
