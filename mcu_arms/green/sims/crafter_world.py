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

import crafter
import numpy as np
from crafter import constants, engine, objects

LAVA_SAFETY_RADIUS = 1  # a respawn tile has no lava this close
HOSTILE_SAFETY_RADIUS = 6  # nor a zombie, skeleton or arrow (zombies chase from 8 tiles; they spawn 6 away)
CREATURES = {"zombie": objects.Zombie, "skeleton": objects.Skeleton, "cow": objects.Cow}


class _PrivateNoiseView(engine.LocalView):
    """LocalView whose night noise uses its own RNG instead of the world's (trap 2)."""

    noise_random: np.random.RandomState

    def _noise(self, canvas, amount, stddev):
        noise = self.noise_random.uniform(32, 127, canvas.shape[:2])[..., None]
        mask = amount * self._vignette(canvas.shape, stddev)[..., None]
        return (1 - mask) * canvas + mask * noise


class ReproducibleCrafterEnv(crafter.Env):
    """crafter.Env with stable object order, a private render-noise RNG, no episode length, and no semantic map."""

    def __init__(self, size: int = 128, area: tuple[int, int] = (64, 64)) -> None:
        super().__init__(area=area, size=(size, size), length=None, seed=0)
        self._local_view = _PrivateNoiseView(self._world, self._textures, list(self._local_view._grid))
        self._local_view.noise_random = np.random.RandomState(0)
        # The privileged whole-world map is never computed, so it cannot leak.
        self._sem_view = lambda: None

    @property
    def player(self) -> objects.Player:
        return self._player

    @property
    def world(self) -> engine.World:
        return self._world

    @property
    def step_count(self) -> int:
        return self._step

    def reset_world(self, seed: int) -> np.ndarray:
        """Generate the world for `seed` (the same world for the same seed, whatever came before)."""
        self._seed = int(seed)
        self._episode = 0
        return self.reset()

    def render(self, size=None):
        self._local_view.noise_random.seed(_noise_seed(self._seed, self._step or 0))
        return super().render(size)

    def _balance_chunk(self, chunk, objs):
        ordered = sorted(objs, key=lambda obj: (int(obj.pos[0]), int(obj.pos[1])))
        super()._balance_chunk(chunk, ordered)

    def respawn_player(self) -> bool:
        """Restore the dead player in the same world: full stats, empty inventory, on a safe tile near spawn.

        Returns False when no safe tile exists, and the player then stays where it died.
        """
        player = self._player
        player.inventory = {name: info["initial"] for name, info in constants.items.items()}
        player.sleeping = False
        player.facing = (0, 1)
        player._hunger = player._thirst = player._fatigue = player._recover = 0
        player._last_health = player.health
        self._last_health = player.health
        target = self._safe_tile_near(np.array((self._world.area[0] // 2, self._world.area[1] // 2)))
        if target is None:
            return False
        if tuple(target) != tuple(player.pos):
            self._world.move(player, target)
        return True

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

    def _safe_tile_near(self, center: np.ndarray) -> np.ndarray | None:
        radius = max(self._world.area)
        for pos in _tiles_by_distance(center, radius, self._world.area):
            material, obj = self._world[pos]
            if material != "grass" or (obj is not None and obj is not self._player):
                continue
            near_materials, _ = self._world.nearby(pos, LAVA_SAFETY_RADIUS)
            _, near_objects = self._world.nearby(pos, HOSTILE_SAFETY_RADIUS)
            hostile = any(isinstance(o, (objects.Zombie, objects.Skeleton, objects.Arrow)) for o in near_objects)
            if "lava" not in near_materials and not hostile:
                return pos
        return None


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
