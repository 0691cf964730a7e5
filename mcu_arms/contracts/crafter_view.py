"""What a Crafter frame lets the player see: the window's geometry, and which of its tiles a dark night drowns.

Shared by the embedded simulator's structured state (green/sims/crafter/state.py), which must report no tile the
frame does not show, and by the scripted player's frame reader (purple/crafter_vision.py), which must not trust the
tiles it cannot make out: one rule, so the two can never disagree. Pure stdlib.

Crafter lights a pixel at night as `d*c + (1-d)*(0.5*enhance((1-m)*c + m*noise, 0.4) + 0.5*tint)`, with d the
daylight and m = max(0, 1-2d) * vignette the share of grey noise, growing towards the window's edges. The part of a
tile's own colour that survives is, averaged over the tile, `d + 0.2*(1-d)*(1 - max(0, 1-2d)*vignette)`; below
VISIBLE_GAIN the tile is a guess (measured 98% right at 0.05-0.08, 99.8% at 0.08-0.1, 100% above 0.15 over 3 seeds
and 28k tiles), so it counts as not visible.
"""

from __future__ import annotations

import math
from functools import lru_cache

VIEW_COLUMNS, VIEW_ROWS = 9, 7  # the local view; two inventory rows sit below it in the frame
PLAYER_CELL = (VIEW_COLUMNS // 2, VIEW_ROWS // 2)  # (column, row) of the player in the view
TILE_PIXELS = 14  # at the 128x128 frame size
VISIBLE_GAIN = 0.08
VIGNETTE_STDDEV = 0.5  # Crafter's night-noise mask: 1 - exp(-r^2 / (2 * 0.5^2)) over the view, r in [-1, 1]


@lru_cache(maxsize=4)
def _axis_means(tiles: int, tile_pixels: int) -> tuple[float, ...]:
    """Per tile along one axis, the mean of exp(-t^2 / (2 s^2)) over its pixels, t spanning [-1, 1] over the view."""
    pixels = tiles * tile_pixels
    means = []
    for tile in range(tiles):
        values = [
            math.exp(-0.5 * (-1 + 2 * pixel / (pixels - 1)) ** 2 / VIGNETTE_STDDEV**2)
            for pixel in range(tile * tile_pixels, (tile + 1) * tile_pixels)
        ]
        means.append(sum(values) / tile_pixels)
    return tuple(means)


@lru_cache(maxsize=1)
def tile_vignette(tile_pixels: int = TILE_PIXELS) -> tuple[tuple[float, ...], ...]:
    """The noise mask averaged over each tile, [row][column]; the mask factorises, so its mean does too."""
    columns = _axis_means(VIEW_COLUMNS, tile_pixels)
    rows = _axis_means(VIEW_ROWS, tile_pixels)
    return tuple(tuple(1 - column * row for column in columns) for row in rows)


def tile_gain(daylight: float, vignette: float) -> float:
    """The share of a tile's own colour that survives the night, averaged over the tile."""
    return daylight + 0.2 * (1 - daylight) * (1 - max(0.0, 1 - 2 * daylight) * vignette)


def visible_tiles(daylight: float, tile_pixels: int = TILE_PIXELS) -> tuple[tuple[bool, ...], ...]:
    """Which tiles of the window the player can make out, [row][column]; the player's own tile always."""
    if daylight >= VISIBLE_GAIN:  # the gain is never below the daylight itself
        return ((True,) * VIEW_COLUMNS,) * VIEW_ROWS
    column, row = PLAYER_CELL
    return tuple(
        tuple(
            (r, c) == (row, column) or tile_gain(daylight, vignette) >= VISIBLE_GAIN
            for c, vignette in enumerate(vignettes)
        )
        for r, vignettes in enumerate(tile_vignette(tile_pixels))
    )
