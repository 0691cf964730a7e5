"""A Crafter Env made reproducible and endless, without touching the installed package.

Two determinism traps in Crafter 1.8.3 are closed here:
1. Objects per chunk live in Python sets ordered by memory address; the spawn/despawn balance draws from the world
   RNG in that order, so identical runs diverged after a few hundred steps. We hand the balance code the objects
   sorted by position.
2. The night-time noise in the renderer drew from the world's RNG, so any extra render changed the trajectory. The
   noise here comes from its own RNG, seeded from (seed, step): a frame is a pure function of the state.

Death does not end the episode: the same player object (zombies hold a reference to it) is restored and moved to a
safe grass tile near the spawn point, keeping its achievement counts.

Imports crafter and numpy at the top: only the embedded backend imports this module.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Iterator

import crafter
import numpy as np
from crafter import constants, engine, objects
from PIL import Image

from mcu_arms.green.sims.crafter.worldgen import generate_world

LAVA_SAFETY_RADIUS = 1  # a respawn tile has no lava this close
HOSTILE_SAFETY_RADIUS = 9  # nor a zombie, skeleton or arrow: outside the 8 tiles from which zombies chase
CREATURES = {"zombie": objects.Zombie, "skeleton": objects.Skeleton, "cow": objects.Cow}


class _PrivateNoiseView(engine.LocalView):
    """LocalView whose night noise uses its own RNG instead of the world's (trap 2)."""

    noise_random: np.random.RandomState

    def _noise(self, canvas, amount, stddev):
        noise = self.noise_random.uniform(32, 127, canvas.shape[:2])[..., None]
        mask = amount * self._vignette(canvas.shape, stddev)[..., None]
        return (1 - mask) * canvas + mask * noise


_READ_TEXTURES = engine.Textures


class PillowPng:
    """What crafter's textures ask of imageio (`imread` of a PNG's bytes), decoded by Pillow directly: the same array
    (imageio decodes them with Pillow too), without imageio's plugin lookup, ~3 ms an image (~0.15 s a process)."""

    @staticmethod
    def imread(data: bytes) -> np.ndarray:
        with Image.open(io.BytesIO(data)) as image:
            return np.array(image)


@functools.cache
def _assets_textures() -> engine.Textures:
    """crafter's textures, read once per process: each crafter.Env reads and decodes every PNG of its assets again
    (~40 ms of every green's episode). A Textures holds the images and their resized copies, nothing of a world.
    crafter's own constructor reads them, its imageio swapped for PillowPng meanwhile."""
    imageio, engine.imageio = engine.imageio, PillowPng
    try:
        return _READ_TEXTURES(constants.root / "assets")
    finally:
        engine.imageio = imageio


@contextlib.contextmanager
def _textures_read_once() -> Iterator[None]:
    """crafter.Env's constructor handed the process's textures instead of reading its own. Env looks its Textures
    class up in crafter.engine at construction; it is put back at once, and a constructor running meanwhile on
    another thread gets the same textures either way."""
    engine.Textures = lambda directory: _assets_textures()
    try:
        yield
    finally:
        engine.Textures = _READ_TEXTURES


class ReproducibleCrafterEnv(crafter.Env):
    """crafter.Env with stable object order, a private render-noise RNG, no episode length, and no semantic map."""

    def __init__(self, size: int = 128, area: tuple[int, int] = (64, 64)) -> None:
        with _textures_read_once():
            super().__init__(area=area, size=(size, size), length=None, seed=0)
        self._local_view: _PrivateNoiseView = _PrivateNoiseView(
            self._world, self._textures, list(self._local_view._grid)
        )
        self._local_view.noise_random = np.random.RandomState(0)
        # The privileged whole-world map is never computed, so it cannot leak.
        self._sem_view = lambda: None
        self.draws_frames = True  # off for an arm that observes the state alone and saves no frames

    @property
    def player(self) -> objects.Player:
        return self._player

    @property
    def world(self) -> engine.World:
        return self._world

    def reset_world(self, seed: int) -> np.ndarray:
        """Generate the world for `seed` (the same world for the same seed, whatever came before).

        Crafter seeds the world with hash((seed, episode)); a tuple of ints hashes the same under any PYTHONHASHSEED.
        """
        self._seed = int(seed)
        self._episode = 0
        return self.reset()

    def reset(self):
        """crafter.Env.reset, the world made by crafter_worldgen (the same world, faster)."""
        center = (self._world.area[0] // 2, self._world.area[1] // 2)
        self._episode += 1
        self._step = 0
        self._world.reset(seed=hash((self._seed, self._episode)) % (2**31 - 1))
        self._update_time()
        self._player = objects.Player(self._world, center)
        self._last_health = self._player.health
        self._world.add(self._player)
        self._unlocked = set()
        generate_world(self._world, self._player)
        return self._obs()

    def render(self, size=None):
        self._local_view.noise_random.seed(_noise_seed(self._seed, self._step or 0))
        return super().render(size)

    def frame(self) -> np.ndarray | None:
        """The frame, or None when frames are off: rendering draws from no RNG of the world, so skipping it changes
        nothing else."""
        return self.render() if self.draws_frames else None

    def _obs(self):
        return self.frame()

    def _balance_chunk(self, chunk, objs):
        ordered = sorted(objs, key=lambda obj: (int(obj.pos[0]), int(obj.pos[1])))
        super()._balance_chunk(chunk, ordered)

    def respawn_player(self) -> str:
        """Restore the dead player in the same world: full stats, empty inventory, on a grass tile near spawn.

        Returns "safe", "near_hostile" (every grass tile had a hostile in chasing range; the farthest was used) or
        "in_place" (no free grass tile at all; the player stays where it died).
        """
        player = self._player
        player.inventory = {name: info["initial"] for name, info in constants.items.items()}
        player.sleeping = False
        player.facing = (0, 1)
        player._hunger = player._thirst = player._fatigue = player._recover = 0
        player._last_health = player.health
        self._last_health = player.health
        target, safe = self._respawn_tile(np.array((self._world.area[0] // 2, self._world.area[1] // 2)))
        if target is None:
            return "in_place"
        if tuple(target) != tuple(player.pos):
            self._world.move(player, target)
        return "safe" if safe else "near_hostile"

    def spawn_creature(self, kind: str, min_distance: int = 2, max_distance: int = 4) -> bool:
        """Add a creature on the nearest free walkable tile at min..max tiles from the player; False if none."""
        center = self._player.pos
        for pos in _tiles_by_distance(center, max_distance, self._world.area):
            if _manhattan(pos, center) < min_distance:
                continue
            material, obj = self._world[pos]
            if obj is None and material in constants.walkable:
                cls = CREATURES[kind]
                creature = cls(self._world, pos) if cls is objects.Cow else cls(self._world, pos, self._player)
                self._world.add(creature)
                return True
        return False

    def _respawn_tile(self, center: np.ndarray) -> tuple[np.ndarray | None, bool]:
        """The nearest free grass tile with no lava next to it and no hostile within chasing range.

        When every grass tile has a hostile in range (a crowded night), the one farthest from them is used and
        reported as not safe. Distances are computed over the whole map here: World.nearby wraps around at the
        map's edge and reports nothing there.
        """
        world = self._world
        width, height = world.area
        xs, ys = np.meshgrid(np.arange(width), np.arange(height), indexing="ij")
        occupant = world._obj_map
        player_index = occupant[tuple(self._player.pos)]
        candidate = (world._mat_map == world._mat_ids["grass"]) & ((occupant == 0) | (occupant == player_index))
        candidate &= ~_dilate(world._mat_map == world._mat_ids.get("lava", -1), LAVA_SAFETY_RADIUS)
        if not candidate.any():
            return None, False
        clearance = np.full(world.area, HOSTILE_SAFETY_RADIUS + 1)
        for obj in world.objects:
            if isinstance(obj, (objects.Zombie, objects.Skeleton, objects.Arrow)):
                distance = np.maximum(np.abs(xs - obj.pos[0]), np.abs(ys - obj.pos[1]))
                clearance = np.minimum(clearance, distance)
        best = clearance[candidate].max()
        chosen = candidate & (clearance == best)
        order = (np.abs(xs - center[0]) + np.abs(ys - center[1])) * width * height + xs * height + ys
        flat = np.where(chosen, order, np.iinfo(np.int64).max).argmin()
        return np.array(np.unravel_index(flat, world.area)), bool(best > HOSTILE_SAFETY_RADIUS)


def _dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """Grow a boolean map by `radius` tiles in every direction (a square), without wrapping at the edges."""
    grown = mask.copy()
    width, height = mask.shape
    for dx in range(-radius, radius + 1):
        for dy in range(-radius, radius + 1):
            shifted = np.zeros_like(mask)
            shifted[max(dx, 0) : width + min(dx, 0), max(dy, 0) : height + min(dy, 0)] = mask[
                max(-dx, 0) : width + min(-dx, 0), max(-dy, 0) : height + min(-dy, 0)
            ]
            grown |= shifted
    return grown


def _noise_seed(seed: int, step: int) -> int:
    return (int(seed) * 1_000_003 + int(step) * 7_919 + 12_345) % (2**32)


def _manhattan(a, b) -> int:
    return int(abs(int(a[0]) - int(b[0])) + abs(int(a[1]) - int(b[1])))


def _tiles_by_distance(center, radius: int, area) -> list[np.ndarray]:
    """Tiles inside the map within `radius` (Manhattan) of center, nearest first, ties broken by coordinates."""
    cx, cy = int(center[0]), int(center[1])
    tiles = [
        (abs(dx) + abs(dy), cx + dx, cy + dy)
        for dx in range(-radius, radius + 1)
        for dy in range(-radius, radius + 1)
        if abs(dx) + abs(dy) <= radius and 0 <= cx + dx < area[0] and 0 <= cy + dy < area[1]
    ]
    tiles.sort()
    return [np.array((x, y)) for _, x, y in tiles]
