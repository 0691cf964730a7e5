"""Read a 128x128 Crafter frame back into tiles and inventory counts, using only the pixels.

The scripted agent is a purple agent: it receives exactly what any other agent receives, a PNG frame. This module
recovers the 9x7 local tile grid and the inventory rows from that frame by matching against Crafter's own tile
textures (shipped inside the `crafter` package), rendered the way the simulator renders them.

Night is the hard part. Crafter darkens the view with a known per-pixel transform (desaturate, tint, blend) plus
uniform grey noise that grows towards the edges. The noise is grey, so it moves only the brightness of a pixel and
never its chroma: matching compares chroma exactly and brightness with a weight that shrinks where the noise is
strong. The daylight level itself is fitted on the player's tile, where the noise is nearly zero. Every score is a
sum of squares expanded into a handful of matrix products, so a frame costs a few milliseconds.
"""

from __future__ import annotations

import base64
import importlib.util
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from mcu_arms.contracts.crafter_view import PLAYER_CELL, VIEW_COLUMNS, VIEW_ROWS, VIGNETTE_STDDEV, visible_tiles

FRAME_SIZE = 128
TILE = FRAME_SIZE // 9  # 14 pixels per tile at 128x128
BORDER = (FRAME_SIZE - TILE * 9) // 2  # the 9x9 tile canvas is centred: a 1-pixel border

VOID = "void"  # outside the world: Crafter leaves the canvas grey there
MATERIALS: tuple[str, ...] = (
    VOID,
    "water",
    "grass",
    "stone",
    "path",
    "sand",
    "tree",
    "lava",
    "coal",
    "iron",
    "diamond",
    "table",
    "furnace",
)
NO_OBJECT = "none"
OBJECTS: tuple[str, ...] = (
    NO_OBJECT,
    "player-left",
    "player-right",
    "player-up",
    "player-down",
    "player-sleep",
    "cow",
    "zombie",
    "skeleton",
    "arrow-left",
    "arrow-right",
    "arrow-up",
    "arrow-down",
    "plant",
    "plant-ripe",
)
# Crafter's inventory order; an item keeps its slot even while its count is zero (only the drawing is skipped).
INVENTORY_ITEMS: tuple[str, ...] = (
    "health",
    "food",
    "drink",
    "energy",
    "sapling",
    "wood",
    "stone",
    "coal",
    "iron",
    "diamond",
    "wood_pickaxe",
    "stone_pickaxe",
    "iron_pickaxe",
    "wood_sword",
    "stone_sword",
    "iron_sword",
)
FACING: dict[str, tuple[int, int]] = {
    "player-left": (-1, 0),
    "player-right": (1, 0),
    "player-up": (0, -1),
    "player-down": (0, 1),
}

MATERIAL_CODE = {name: code for code, name in enumerate(MATERIALS)}
OBJECT_CODE = {name: code for code, name in enumerate(OBJECTS)}

_CREATURE_GROUND = ("grass", "sand", "path")  # Crafter's walkable materials: where any creature can stand
_ARROW_EXTRA_GROUND = ("water", "lava")  # arrows also fly over these
_NIGHT_TINT = np.array([0.0, 16.0, 64.0], np.float32)
_NOISE_LOW, _NOISE_HIGH = 32.0, 127.0  # Crafter's night noise: uniform grey in [32, 127)
_NOISE_MEAN = (_NOISE_LOW + _NOISE_HIGH) / 2
_NOISE_STD = (_NOISE_HIGH - _NOISE_LOW) / np.sqrt(12.0)
_PIXEL_STD = 3.0  # rounding error of the renderer, in grey levels: the scale a noisy pixel is weighed against
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # PIL's "L" conversion, which ImageEnhance.Color uses
_SLEEP_CHROMA_LIMIT = 2.0  # while asleep the whole view is grey plus a fixed tint...
_SLEEP_CHROMA = np.array([0.0, 0.0, 8.0]) - 8.0 / 3  # ...half of (0, 0, 16), whose chroma is this


@dataclass(frozen=True)
class FrameReading:
    """What one frame shows. Grids are indexed [row, column]; row 0 is the top (north), column 0 the west."""

    materials: np.ndarray  # (7, 9) codes into MATERIALS
    objects: np.ndarray  # (7, 9) codes into OBJECTS
    facing: tuple[int, int]  # (dx, dy) the player faces; dy = -1 is up
    sleeping: bool  # asleep: the view is grey and the grids are not read (all void / none)
    daylight: float  # 1.0 is full day, 0.0 the darkest night
    inventory: dict[str, int]
    reliable: np.ndarray  # (7, 9) bool: False where night noise drowns the tile (dark corners), so the read is a guess

    def material(self, column: int, row: int) -> str:
        return MATERIALS[self.materials[row, column]]

    def object(self, column: int, row: int) -> str:
        return OBJECTS[self.objects[row, column]]


def decode_observation(png_base64: str) -> np.ndarray:
    """The RGB frame inside an ObservationPayload.obs."""
    with Image.open(io.BytesIO(base64.b64decode(png_base64))) as image:
        return np.asarray(image.convert("RGB"))


def _assets_dir() -> Path:
    """Crafter's texture folder, found without importing crafter (its import pulls in world generation)."""
    spec = importlib.util.find_spec("crafter")
    if spec is None or spec.origin is None:
        raise RuntimeError("the crafter package is not installed; install crafter==1.8.3")
    return Path(spec.origin).parent / "assets"


def _texture(name: str, size: int) -> np.ndarray:
    with Image.open(_assets_dir() / f"{name}.png") as image:
        return np.asarray(image.convert("RGBA").resize((size, size), resample=Image.Resampling.NEAREST))


def _blend(canvas: np.ndarray, rgba: np.ndarray) -> np.ndarray:
    """Alpha-draw a texture exactly as Crafter does (float32, then truncation to uint8)."""
    alpha = rgba[..., 3:].astype(np.float32) / 255
    texture = rgba[..., :3].astype(np.float32) / 255
    current = canvas.astype(np.float32) / 255
    return (255 * (alpha * texture + (1 - alpha) * current)).astype(np.uint8)


def _vignette() -> np.ndarray:
    """Crafter's night-noise mask over the local view, in frame orientation [y, x]."""
    width, height = VIEW_COLUMNS * TILE, VIEW_ROWS * TILE
    xs = np.linspace(-1, 1, width)[None, :]
    ys = np.linspace(-1, 1, height)[:, None]
    return (1 - np.exp(-0.5 * (xs**2 + ys**2) / VIGNETTE_STDDEV**2)).astype(np.float32)


class _Candidates:
    """Clean renderings of every (material, object) pair a tile can show, flattened for matrix products."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        materials = {name: self._material_tile(name) for name in MATERIALS}
        tiles = []
        for material, obj in pairs:
            tile = materials[material]
            if obj != NO_OBJECT:
                tile = _blend(tile, _texture(obj, TILE))
            tiles.append(tile.astype(np.float32).reshape(-1, 3))
        rgb = np.stack(tiles)  # (J, P, 3)
        self.rgb = rgb
        self.material_codes = np.array([MATERIAL_CODE[m] for m, _ in pairs])
        self.object_codes = np.array([OBJECT_CODE[o] for _, o in pairs])
        self.luma = rgb @ _LUMA  # (J, P)
        grey = rgb.mean(axis=2)
        chroma = rgb - grey[..., None]
        # Stored transposed and contiguous: (K, J) right-hand sides keep the matrix products small and single-pass.
        self.chroma_t = np.ascontiguousarray(chroma.reshape(len(pairs), -1).T)
        self.chroma_energy_t = np.ascontiguousarray((chroma**2).sum(axis=2).T)
        self.grey_t = np.ascontiguousarray(grey.T)
        self.luma_t = np.ascontiguousarray(self.luma.T)
        self.grey_squared_t = np.ascontiguousarray((grey**2).T)
        self.grey_luma_t = np.ascontiguousarray((grey * self.luma).T)
        self.luma_squared_t = np.ascontiguousarray((self.luma**2).T)

    @staticmethod
    def _material_tile(name: str) -> np.ndarray:
        if name == VOID:
            return np.full((TILE, TILE, 3), 127, np.uint8)
        return _texture(name, TILE)[..., :3].copy()  # materials are drawn without alpha


def _tile_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Pairs for ordinary cells, and for the player's cell (always the player on walkable ground)."""
    ordinary = [(material, NO_OBJECT) for material in MATERIALS]
    for obj in OBJECTS[1:]:
        if obj.startswith("player"):
            continue
        grounds = _CREATURE_GROUND + (_ARROW_EXTRA_GROUND if obj.startswith("arrow") else ())
        if obj.startswith("plant"):
            grounds = ("grass",)
        ordinary.extend((ground, obj) for ground in grounds)
    player = [(ground, obj) for obj in OBJECTS if obj.startswith("player") for ground in _CREATURE_GROUND]
    return ordinary, player


@lru_cache(maxsize=1)
def _shared_reader_state() -> tuple[_Candidates, _Candidates, np.ndarray, np.ndarray, np.ndarray]:
    ordinary, player = _tile_pairs()
    vignette = _vignette()
    tiles = vignette.reshape(VIEW_ROWS, TILE, VIEW_COLUMNS, TILE).transpose(0, 2, 1, 3).reshape(-1, TILE * TILE)
    return _Candidates(ordinary), _Candidates(player), tiles, *_inventory_templates()


def _inventory_templates() -> tuple[np.ndarray, np.ndarray]:
    """For each inventory slot, the exact 14x14 drawing of counts 0..9 (0 draws nothing)."""
    item_size, digit_size = int(0.8 * TILE), int(0.6 * TILE)
    item_offset, digit_offset = int(0.1 * TILE), int(0.4 * TILE)
    digits = [_texture(str(count), digit_size) for count in range(1, 10)]
    templates = np.zeros((len(INVENTORY_ITEMS), 10, TILE, TILE, 3), np.uint8)
    for slot, item in enumerate(INVENTORY_ITEMS):
        icon = _texture(item, item_size)
        for count in range(1, 10):
            canvas = templates[slot, count]
            region = canvas[item_offset : item_offset + item_size, item_offset : item_offset + item_size]
            region[:] = _blend(region, icon)
            region = canvas[digit_offset : digit_offset + digit_size, digit_offset : digit_offset + digit_size]
            region[:] = _blend(region, digits[count - 1])
    slots = np.array([(slot % 9, VIEW_ROWS + slot // 9) for slot in range(len(INVENTORY_ITEMS))])
    return templates.astype(np.float32).reshape(len(INVENTORY_ITEMS), 10, -1), slots


def _scores(observed: np.ndarray, noise_mask: np.ndarray, daylight: float, candidates: _Candidates) -> np.ndarray:
    """Mismatch of each observed tile (T, P, 3) against each candidate, under the night model: (T, J).

    Crafter lights a clean pixel c as  d*c + (1-d)*(0.5*enh((1-m)*c + m*n) + 0.5*tint)  with enh the 0.4 colour
    enhance, m the noise mask and n uniform grey noise. Chroma is noise-free, so it is matched exactly; brightness
    is matched around the noise mean, weighed down where the noise spread dominates.
    """
    d = daylight
    mask = max(0.0, 1.0 - 2.0 * d) * noise_mask  # (T, P)
    night = (1 - d) * 0.5 * (1 - mask)
    alpha = d + night * 0.4  # scales the candidate's own colour
    beta = night * 0.6  # scales the candidate's luma (the desaturated part)
    noise_gain = (1 - d) * 0.5 * mask
    offset = (1 - d) * 0.5 * _NIGHT_TINT
    weight = 1.0 / (1.0 + (noise_gain * _NOISE_STD / _PIXEL_STD) ** 2)

    observed_grey = observed.mean(axis=2)
    chroma = observed - observed_grey[..., None] - (offset - offset.mean())
    weighted_chroma = (alpha[..., None] * chroma).reshape(len(observed), -1)
    chroma_cost = (
        (chroma**2).sum(axis=(1, 2))[:, None]
        - 2 * weighted_chroma @ candidates.chroma_t
        + (alpha**2) @ candidates.chroma_energy_t
    )
    residual = observed_grey - offset.mean() - noise_gain * _NOISE_MEAN
    grey_cost = (
        (weight * residual**2).sum(axis=1)[:, None]
        - 2 * (weight * residual * alpha) @ candidates.grey_t
        - 2 * (weight * residual * beta) @ candidates.luma_t
        + (weight * alpha**2) @ candidates.grey_squared_t
        + 2 * (weight * alpha * beta) @ candidates.grey_luma_t
        + (weight * beta**2) @ candidates.luma_squared_t
    )
    return chroma_cost + 3 * grey_cost


class FrameReader:
    """Turns frames into FrameReadings. Build one per agent; the templates are shared and built once."""

    def __init__(self) -> None:
        (
            self._ordinary,
            self._player,
            self._noise_mask,
            self._inventory_templates,
            self._inventory_slots,
        ) = _shared_reader_state()
        self._player_index = PLAYER_CELL[1] * VIEW_COLUMNS + PLAYER_CELL[0]

    def read(self, frame: np.ndarray) -> FrameReading:
        if frame.shape != (FRAME_SIZE, FRAME_SIZE, 3):
            raise ValueError(f"expected a {FRAME_SIZE}x{FRAME_SIZE} RGB frame, got shape {frame.shape}")
        inventory = self._read_inventory(frame)
        view = frame[BORDER : BORDER + VIEW_ROWS * TILE, BORDER : BORDER + VIEW_COLUMNS * TILE].astype(np.float32)
        tiles = view.reshape(VIEW_ROWS, TILE, VIEW_COLUMNS, TILE, 3).transpose(0, 2, 1, 3, 4)
        tiles = tiles.reshape(VIEW_ROWS * VIEW_COLUMNS, TILE * TILE, 3)
        if self._is_asleep(view):
            return FrameReading(
                materials=np.zeros((VIEW_ROWS, VIEW_COLUMNS), np.int64),
                objects=np.zeros((VIEW_ROWS, VIEW_COLUMNS), np.int64),
                facing=(0, 1),
                sleeping=True,
                daylight=0.0,
                inventory=inventory,
                reliable=np.zeros((VIEW_ROWS, VIEW_COLUMNS), bool),
            )
        daylight, player_choice = self._fit_daylight(tiles[self._player_index : self._player_index + 1])
        best = _scores(tiles, self._noise_mask, daylight, self._ordinary).argmin(axis=1)
        materials = self._ordinary.material_codes[best]
        objects = self._ordinary.object_codes[best]
        materials[self._player_index] = self._player.material_codes[player_choice]
        objects[self._player_index] = self._player.object_codes[player_choice]
        player_object = OBJECTS[objects[self._player_index]]
        return FrameReading(
            materials=materials.reshape(VIEW_ROWS, VIEW_COLUMNS),
            objects=objects.reshape(VIEW_ROWS, VIEW_COLUMNS),
            facing=FACING.get(player_object, (0, 1)),
            sleeping=False,
            daylight=daylight,
            inventory=inventory,
            reliable=self._reliable(daylight),
        )

    def _fit_daylight(self, player_tile: np.ndarray) -> tuple[float, int]:
        """Daylight and the player's look, fitted on the centre tile by least squares.

        The noise mask is nearly zero at the centre, so there a clean pixel c is lit as  night(c) + d*(c - night(c))
        with night(c) = 0.2c + 0.3*luma(c) + 0.5*tint: linear in d, solved in closed form for each candidate.
        """
        colour = self._player.rgb  # (J, P, 3)
        night = 0.2 * colour + 0.3 * self._player.luma[..., None] + 0.5 * _NIGHT_TINT
        span = (colour - night).reshape(len(colour), -1)
        rise = player_tile.reshape(1, -1) - night.reshape(len(colour), -1)
        daylight = np.clip((rise * span).sum(axis=1) / np.maximum((span**2).sum(axis=1), 1e-6), 0.0, 1.0)
        costs = ((rise - daylight[:, None] * span) ** 2).sum(axis=1)
        choice = int(costs.argmin())
        return float(daylight[choice]), choice

    @staticmethod
    def _reliable(daylight: float) -> np.ndarray:
        """The tiles the night leaves visible (contracts/crafter_view.py: the rule the simulator's state obeys too)."""
        return np.array(visible_tiles(daylight, TILE), bool)

    @staticmethod
    def _is_asleep(view: np.ndarray) -> bool:
        """Asleep, Crafter shows the view fully desaturated plus one tint: every pixel has the tint's chroma.

        A dark night over uniform ground is nearly as flat, but its chroma is the (much stronger) night tint's.
        """
        sample = view[::3, ::3]
        chroma = (sample - sample.mean(axis=2, keepdims=True)).reshape(-1, 3)
        flat = chroma.std(axis=0).max() < _SLEEP_CHROMA_LIMIT
        return bool(flat and np.abs(chroma.mean(axis=0) - _SLEEP_CHROMA).max() < _SLEEP_CHROMA_LIMIT)

    def _read_inventory(self, frame: np.ndarray) -> dict[str, int]:
        counts = {}
        for slot, item in enumerate(INVENTORY_ITEMS):
            column, row = self._inventory_slots[slot]
            top, left = BORDER + row * TILE, BORDER + column * TILE
            patch = frame[top : top + TILE, left : left + TILE].astype(np.float32).reshape(-1)
            distances = ((self._inventory_templates[slot] - patch) ** 2).sum(axis=1)
            counts[item] = int(distances.argmin())
        return counts
