"""MineStudio's agent-mode camera quantisation, reimplemented so it can be used and tested without minestudio.

VPT/MineStudio discretise each camera axis with mu-law (bin size 2, max 10 degrees, mu 10) into 11 bins, so an
agent-mode camera move is one of 11 values per axis; anything beyond ±10 degrees is clipped. The compact camera
index joins the two axes: index = pitch_bin * 11 + yaw_bin, with 60 = (5, 5) = no move.
"""

from __future__ import annotations

import math

CAMERA_BINSIZE = 2
CAMERA_MAXVAL = 10
CAMERA_MU = 10.0
CAMERA_BINS = 2 * CAMERA_MAXVAL // CAMERA_BINSIZE + 1  # 11
NULL_BIN = CAMERA_BINS // 2  # 5: zero degrees
NULL_CAMERA_INDEX = NULL_BIN * CAMERA_BINS + NULL_BIN  # 60
MAX_CAMERA_INDEX = CAMERA_BINS * CAMERA_BINS - 1  # 120


def degrees_to_bin(degrees: float) -> int:
    """Clip to ±maxval, mu-law encode, and round to the nearest bin (half to even, as numpy rounds)."""
    clipped = max(-CAMERA_MAXVAL, min(CAMERA_MAXVAL, float(degrees)))
    normalised = clipped / CAMERA_MAXVAL
    encoded = math.copysign(math.log1p(CAMERA_MU * abs(normalised)) / math.log1p(CAMERA_MU), normalised)
    return round((encoded * CAMERA_MAXVAL + CAMERA_MAXVAL) / CAMERA_BINSIZE)


def bin_to_degrees(bin_index: int) -> float:
    """The camera move a bin stands for: the mu-law decode of its centre."""
    if not 0 <= bin_index < CAMERA_BINS:
        raise ValueError(f"camera bin must be in 0..{CAMERA_BINS - 1}, got {bin_index}")
    normalised = (bin_index * CAMERA_BINSIZE - CAMERA_MAXVAL) / CAMERA_MAXVAL
    decoded = math.copysign(((1.0 + CAMERA_MU) ** abs(normalised) - 1.0) / CAMERA_MU, normalised)
    return decoded * CAMERA_MAXVAL if normalised else 0.0


SURVIVING_DEGREES: tuple[float, ...] = tuple(bin_to_degrees(b) for b in range(CAMERA_BINS))


def quantise_degrees(degrees: float) -> float:
    """What an agent-mode MineStudio actually turns when asked for `degrees` on one axis."""
    return bin_to_degrees(degrees_to_bin(degrees))


def quantise_camera(pitch: float, yaw: float) -> tuple[float, float]:
    return quantise_degrees(pitch), quantise_degrees(yaw)


def camera_index(pitch_bin: int, yaw_bin: int) -> int:
    """The compact (joint) camera index of a (pitch bin, yaw bin) pair."""
    for value in (pitch_bin, yaw_bin):
        if not 0 <= value < CAMERA_BINS:
            raise ValueError(f"camera bin must be in 0..{CAMERA_BINS - 1}, got {value}")
    return pitch_bin * CAMERA_BINS + yaw_bin


def camera_bins(index: int) -> tuple[int, int]:
    """(pitch bin, yaw bin) of a compact camera index 0..120."""
    if not 0 <= index <= MAX_CAMERA_INDEX:
        raise ValueError(f"camera index must be in 0..{MAX_CAMERA_INDEX}, got {index}")
    pitch_bin, yaw_bin = divmod(index, CAMERA_BINS)
    return pitch_bin, yaw_bin


def camera_index_degrees(index: int) -> tuple[float, float]:
    """(pitch, yaw) degrees of a compact camera index."""
    pitch_bin, yaw_bin = camera_bins(index)
    return bin_to_degrees(pitch_bin), bin_to_degrees(yaw_bin)


def degrees_to_camera_index(pitch: float, yaw: float) -> int:
    return camera_index(degrees_to_bin(pitch), degrees_to_bin(yaw))
