"""Crafter's world generation: the same world draw for draw, without a noise call per point.

crafter.worldgen calls opensimplex once per noise value (28,000 a world), each call wrapped in a partial, a dict and
two Python calls, and does numpy scalar arithmetic per tile: ~60 ms a world with numba compiling opensimplex, 1.7 s
without it, and numba itself costs ~0.45 s (import and cached kernel) in every process that makes a world. Here every
noise value crafter may read is computed for the whole area at once (`simplex_grid`, opensimplex's values to the last
bit, with the same arguments), and each tile's terrain is decided by the same conditions in the same order, with the
same floating-point operations and the same draws from the world's RNG; the distances to the player and the spawn
sigmoid are computed for the whole area too (numpy's element-wise sqrt and exp give each element what its scalar call
gives). tests/test_embedded_sim.py compares the two generators world for world, object for object, and the RNG state
they leave.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from crafter import constants, engine, objects

from mcu_arms.green.sims.crafter.simplex_grid import SimplexGrid


def generate_world(world: engine.World, player: objects.Player) -> None:
    """What crafter.worldgen.generate_world makes of `world` (freshly reset) around `player`."""
    simplex = SimplexGrid(seed=world.random.randint(0, 2**31 - 1))
    width, height = world.area
    dx = np.arange(width)[:, None] - player.pos[0]
    dy = np.arange(height)[None, :] - player.pos[1]
    distance = np.sqrt(dx**2 + dy**2)
    noise = _noise(simplex, width, height)
    start = 4 - distance
    start += 2 * noise[0]
    start = 1 / (1 + np.exp(-start))
    tile_noise = np.moveaxis(noise[1:], 0, -1).tolist()
    tunnels = np.zeros(world.area, bool)
    uniform = world.random.uniform
    materials: dict[tuple[int, int], str] = {}  # what was just set, instead of reading it back from the world
    for x in range(width):
        for y in range(height):
            material = _material(float(start[x, y]), tile_noise[x][y], uniform)
            if material == "tunnel":
                tunnels[x, y] = True
                material = "path"
            world[x, y] = materials[x, y] = material
    walkable = constants.walkable
    for x in range(width):
        for y in range(height):
            if (material := materials[x, y]) in walkable:
                _place_object(world, (x, y), player, material, float(distance[x, y]), bool(tunnels[x, y]), uniform)


def _noise(simplex: SimplexGrid, width: int, height: int) -> np.ndarray:
    """Every noise value crafter's generator may read, for every tile: (field, x, y). crafter's noise of octaves
    {size: weight} is sum(weight * noise3(x / size, y / size, z)) / sum(weights); its arguments are written here as
    crafter computes them (the same divisions in the same order), the octaves combined where they are read."""
    x = np.arange(width, dtype=np.float64)[:, None]
    y = np.arange(height, dtype=np.float64)[None, :]
    fields = (  # (x, y, z) of each noise3 call, in the order _material unpacks them
        (x / 3, y / 3, 8),  # start
        (x / 15, y / 15, 3),  # water, wide octave
        (x / 5, y / 5, 3),  # water, fine octave
        (x / 15, y / 15, 0),  # mountain, wide octave
        (x / 5, y / 5, 0),  # mountain, fine octave
        (x / 7, y / 7, 6),  # cave
        (2 * x / 3, y / 5 / 3, 7),  # horizontal tunnels
        (x / 5 / 3, 2 * y / 3, 7),  # vertical tunnels
        (x / 8, y / 8, 1),  # coal
        (x / 6, y / 6, 2),  # iron
        (x / 5, y / 5, 6),  # lava
        (x / 9, y / 9, 4),  # sand
        (x / 7, y / 7, 5),  # trees
    )
    xs, ys, zs = (np.stack([np.broadcast_to(field[axis], (width, height)) for field in fields]) for axis in range(3))
    return simplex.noise3(xs, ys, zs)


def _material(start: float, noise: list[float], uniform: Callable[[], float]) -> str:
    """The tile's material ("tunnel": a path crafter marks as a tunnel), by crafter's conditions in crafter's order:
    each draw only where crafter draws (noise draws nothing, so reading values crafter would not compute changes
    nothing)."""
    water_wide, water_fine, mountain_wide, mountain_fine, cave, across, along, coal, iron, lava, sand, tree = noise
    if start > 0.5:
        return "grass"
    water = water_wide + 0.15 * water_fine + 0.1
    water -= 2 * start
    mountain = (mountain_wide + 0.3 * mountain_fine) / (1 + 0.3)
    mountain -= 4 * start + 0.3 * water
    if mountain > 0.15:
        if cave > 0.15 and mountain > 0.3:
            return "path"
        if across > 0.4 or along > 0.4:
            return "tunnel"
        if coal > 0 and uniform() > 0.85:
            return "coal"
        if iron > 0.4 and uniform() > 0.75:
            return "iron"
        if mountain > 0.18 and uniform() > 0.994:
            return "diamond"
        if mountain > 0.3 and lava > 0.35:
            return "lava"
        return "stone"
    if 0.25 < water <= 0.35 and sand > -0.2:
        return "sand"
    if 0.3 < water:
        return "water"
    if tree > 0 and uniform() > 0.8:
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
