"""opensimplex's 3D noise for many points at once, in numpy: the same value to the last bit.

crafter builds each world from ~28,000 calls of `opensimplex.OpenSimplex(seed).noise3`. In pure Python a call costs
~55 µs (1.7 s a world); numba makes it ~1 µs, but importing numba and loading its compiled kernel costs ~0.45 s in
every process that builds a world, on the critical path of a single episode. Here the points are evaluated together.

Exactness: opensimplex (a port of Kurt Spencer's OpenSimplex) sums, for each point, the contributions of up to eight
lattice vertices in an order that depends on the region the point falls in, and computes each vertex's displacement
as `((d - a) - m * SQUISH) - b` for small integers a, m, b (b where the source adjusts a displacement after setting it).
Each vertex is written here as those integers, vertex by vertex in the source's order, and every floating-point
operation is the source's, in its order: IEEE arithmetic then gives each element the source's result. A contribution
the source skips (attenuation not positive) adds 0.0, which leaves a sum unchanged.
tests/test_embedded_sim.py compares this with opensimplex on random points and on crafter's worlds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from opensimplex.constants import GRADIENTS3, NORM_CONSTANT3, SQUISH_CONSTANT3, STRETCH_CONSTANT3

Axes = tuple[np.ndarray, np.ndarray, np.ndarray]  # x, y, z of every point
_MASK64 = (1 << 64) - 1
_LCG_MULTIPLIER = 6364136223846793005
_LCG_INCREMENT = 1442695040888963407


class _Vertex(NamedTuple):
    """A lattice vertex as the source writes its displacement: `((d - before) - squish * SQUISH) - after`, per axis;
    the vertex itself is the cell's base plus `before` plus `after`. Each number is an int, or an array of them (one
    per point) for the extra vertices, which differ from point to point."""

    before: tuple[Any, Any, Any]
    squish: Any
    after: tuple[Any, Any, Any] = (0, 0, 0)


def _take(axes: Axes, points: np.ndarray) -> Axes:
    return axes[0][points], axes[1][points], axes[2][points]


def _along(axis: int, value: int, elsewhere: int) -> tuple[int, int, int]:
    """`value` on `axis`, `elsewhere` on the other two."""
    offsets = [elsewhere] * 3
    offsets[axis] = value
    return offsets[0], offsets[1], offsets[2]


class SimplexGrid:
    """`noise3(x, y, z)` for arrays of coordinates: what `opensimplex.OpenSimplex(seed).noise3` gives each."""

    def __init__(self, seed: int) -> None:
        perm, grad_index = _permutation(seed)
        # The source's hash perm_grad_index3[(perm[(perm[x & 255] + y) & 255] + z) & 255], its first two lookups
        # tabled, and each hash's gradient as floats (the source multiplies the integer gradient by a float).
        self._hash_xy = perm[(perm[:, None] + np.arange(256)) & 0xFF]
        self._gradient = [GRADIENTS3[grad_index + axis].astype(np.float64) for axis in range(3)]

    def noise3(self, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        x, y, z = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x, y, z)))
        shape = x.shape
        x, y, z = x.ravel(), y.ravel(), z.ravel()
        stretch_offset = (x + y + z) * STRETCH_CONSTANT3
        xs, ys, zs = x + stretch_offset, y + stretch_offset, z + stretch_offset
        xsb, ysb, zsb = np.floor(xs), np.floor(ys), np.floor(zs)
        squish_offset = (xsb + ysb + zsb) * SQUISH_CONSTANT3
        origin = (x - (xsb + squish_offset), y - (ysb + squish_offset), z - (zsb + squish_offset))
        inside = (xs - xsb, ys - ysb, zs - zsb)
        in_sum = inside[0] + inside[1] + inside[2]
        base = (xsb.astype(np.int64), ysb.astype(np.int64), zsb.astype(np.int64))

        value = np.empty(x.size)
        near = in_sum <= 1
        far = ~near & (in_sum >= 2)
        for region, shape_of_cell in ((near, _NEAR), (far, _FAR), (~near & ~far, _OCTAHEDRON)):
            points = np.flatnonzero(region)
            region_origin, region_base = _take(origin, points), _take(base, points)
            total = np.zeros(points.size)
            for vertex in shape_of_cell.vertices(_take(inside, points), in_sum[points]):
                total += self._contribution(vertex, region_origin, region_base)
            value[points] = total
        return (value / NORM_CONSTANT3).reshape(shape)

    def _contribution(self, vertex: _Vertex, origin: Axes, base: Axes) -> np.ndarray:
        """The source's `attn *= attn; value += attn * attn * extrapolate(...)` where attn > 0, else 0.0 (which
        leaves the sum as the source leaves it)."""
        squish = vertex.squish * SQUISH_CONSTANT3
        dx, dy, dz = (((d - vertex.before[axis]) - squish) - vertex.after[axis] for axis, d in enumerate(origin))
        attenuation = 2 - dx * dx - dy * dy - dz * dz
        lattice = [base[axis] + vertex.before[axis] + vertex.after[axis] for axis in range(3)]
        hashed = (self._hash_xy[lattice[0] & 0xFF, lattice[1] & 0xFF] + lattice[2]) & 0xFF
        gradient = self._gradient[0][hashed] * dx + self._gradient[1][hashed] * dy + self._gradient[2][hashed] * dz
        squared = attenuation * attenuation
        return np.where(attenuation > 0, squared * squared * gradient, 0.0)


class _Cell:
    """One of the source's three regions: its fixed vertices in the source's order, then two extra vertices that
    depend on a small case code per point (tabled once from `extras`, a transcription of the source's branches)."""

    def __init__(
        self,
        fixed: tuple[_Vertex, ...],
        case_code: Callable[[Axes, np.ndarray], np.ndarray],
        extras: Callable[[int], tuple[_Vertex, _Vertex]],
        codes: int,
    ) -> None:
        self._fixed = fixed
        self._case_code = case_code
        tabled = [extras(code) for code in range(codes)]
        self._extra_tables = [
            (
                np.array([vertices[extra].before for vertices in tabled]),
                np.array([vertices[extra].squish for vertices in tabled]),
                np.array([vertices[extra].after for vertices in tabled]),
            )
            for extra in range(2)
        ]

    def vertices(self, inside: Axes, in_sum: np.ndarray) -> list[_Vertex]:
        code = self._case_code(inside, in_sum)
        extra = [
            _Vertex(tuple(before[code].T), squish[code], tuple(after[code].T))
            for before, squish, after in self._extra_tables
        ]
        return [*self._fixed, *extra]


def _two_closest(
    scores: Axes, points: tuple[int, int, int], nearer: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A tetrahedron's two closest vertices out of three (score and point of each), as the source picks them."""
    a_score, b_score, z_score = scores
    a_point, b_point, z_point = points
    b_nearer = nearer(b_score, a_score)
    replace_b = ~b_nearer & nearer(z_score, b_score)
    replace_a = ~replace_b & b_nearer & nearer(z_score, a_score)
    return (
        np.where(replace_a, z_score, a_score),
        np.where(replace_a, z_point, a_point),
        np.where(replace_b, z_score, b_score),
        np.where(replace_b, z_point, b_point),
    )


def _near_case(inside: Axes, in_sum: np.ndarray) -> np.ndarray:
    """The source's `c` in the (0,0,0) tetrahedron: one bit when (0,0,0) is among the two closest, else two."""
    a_score, a_point, b_score, b_point = _two_closest(inside, (0x01, 0x02, 0x04), np.greater)
    wins = 1 - in_sum
    origin_closest = (wins > a_score) | (wins > b_score)
    return np.where(origin_closest, np.where(b_score > a_score, b_point, a_point), a_point | b_point)


def _near_extras(closest: int) -> tuple[_Vertex, _Vertex]:
    if closest in (0x01, 0x02, 0x04):  # (0,0,0) is one of the two closest: its neighbours, not squished
        x = (-1, 0) if closest & 0x01 == 0 else (1, 1)
        y = ((0, -1) if closest & 0x01 == 0 else (-1, 0)) if closest & 0x02 == 0 else (1, 1)
        z = (0, -1) if closest & 0x04 == 0 else (1, 1)
        return _Vertex((x[0], y[0], z[0]), 0), _Vertex((x[1], y[1], z[1]), 0)
    x, y, z = ((0, -1) if closest & bit == 0 else (1, 1) for bit in (0x01, 0x02, 0x04))
    return _Vertex((x[0], y[0], z[0]), 2), _Vertex((x[1], y[1], z[1]), 1)


def _far_case(inside: Axes, in_sum: np.ndarray) -> np.ndarray:
    """The source's `c` in the (1,1,1) tetrahedron: two bits when (1,1,1) is among the two closest, else one."""
    a_score, a_point, b_score, b_point = _two_closest(inside, (0x06, 0x05, 0x03), np.less)
    wins = 3 - in_sum
    corner_closest = (wins < a_score) | (wins < b_score)
    return np.where(corner_closest, np.where(b_score < a_score, b_point, a_point), a_point & b_point)


def _far_extras(closest: int) -> tuple[_Vertex, _Vertex]:
    if closest in (0x03, 0x05, 0x06):  # (1,1,1) is one of the two closest: squished three times
        x = (2, 1) if closest & 0x01 else (0, 0)
        y = (1, 1) if closest & 0x02 else (0, 0)
        y_after = ((0, 1) if closest & 0x01 else (1, 0)) if closest & 0x02 else (0, 0)  # the source's `+= 1` after
        z = (1, 2) if closest & 0x04 else (0, 0)
        return (
            _Vertex((x[0], y[0], z[0]), 3, (0, y_after[0], 0)),
            _Vertex((x[1], y[1], z[1]), 3, (0, y_after[1], 0)),
        )
    x, y, z = ((1, 2) if closest & bit else (0, 0) for bit in (0x01, 0x02, 0x04))
    return _Vertex((x[0], y[0], z[0]), 1), _Vertex((x[1], y[1], z[1]), 2)


def _octahedron_case(inside: Axes, in_sum: np.ndarray) -> np.ndarray:
    """The source's two closest points in the octahedron, as a_point * 8 + b_point."""
    xins, yins, zins = inside
    p1, p2, p3 = xins + yins, xins + zins, yins + zins
    a_score, a_point = np.where(p1 > 1, p1 - 1, 1 - p1), np.where(p1 > 1, 0x03, 0x04)
    b_score, b_point = np.where(p2 > 1, p2 - 1, 1 - p2), np.where(p2 > 1, 0x05, 0x02)
    score, point = np.where(p3 > 1, p3 - 1, 1 - p3), np.where(p3 > 1, 0x06, 0x01)
    replace_a = (a_score <= b_score) & (a_score < score)
    replace_b = ~replace_a & (a_score > b_score) & (b_score < score)
    return np.where(replace_a, point, a_point) * 8 + np.where(replace_b, point, b_point)


def _octahedron_extras(code: int) -> tuple[_Vertex, _Vertex]:
    a_point, b_point = divmod(code, 8)
    a_far, b_far = (bin(p).count("1") == 2 for p in (a_point, b_point))  # a point on the (1,1,1) side has two bits
    if a_far and b_far:  # (1,1,1), and two steps along the first shared axis
        shared = a_point & b_point
        axis = 0 if shared & 0x01 else 1 if shared & 0x02 else 2
        return _Vertex((1, 1, 1), 3), _Vertex(_along(axis, 2, 0), 2)
    if not a_far and not b_far:  # (0,0,0), and a permutation of (1,1,-1): -1 on the first omitted axis
        omitted = a_point | b_point
        axis = 0 if omitted & 0x01 == 0 else 1 if omitted & 0x02 == 0 else 2
        return _Vertex((0, 0, 0), 0), _Vertex(_along(axis, -1, 1), 1)
    far_point, near_point = (a_point, b_point) if a_far else (b_point, a_point)
    minus = 0 if far_point & 0x01 == 0 else 1 if far_point & 0x02 == 0 else 2
    plus_two = 0 if near_point & 0x01 else 1 if near_point & 0x02 else 2
    return (
        _Vertex(_along(minus, -1, 1), 1),
        _Vertex((0, 0, 0), 2, _along(plus_two, 2, 0)),  # the source's `-= 2`, after the squish
    )


_NEAR = _Cell(
    (_Vertex((0, 0, 0), 0), _Vertex((1, 0, 0), 1), _Vertex((0, 1, 0), 1), _Vertex((0, 0, 1), 1)),
    _near_case,
    _near_extras,
    codes=8,
)
_FAR = _Cell(
    (_Vertex((1, 1, 0), 2), _Vertex((1, 0, 1), 2), _Vertex((0, 1, 1), 2), _Vertex((1, 1, 1), 3)),
    _far_case,
    _far_extras,
    codes=8,
)
_OCTAHEDRON = _Cell(
    (
        _Vertex((1, 0, 0), 1),
        _Vertex((0, 1, 0), 1),
        _Vertex((0, 0, 1), 1),
        _Vertex((1, 1, 0), 2),
        _Vertex((1, 0, 1), 2),
        _Vertex((0, 1, 1), 2),
    ),
    _octahedron_case,
    _octahedron_extras,
    codes=64,
)


def _permutation(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """opensimplex's tables for `seed`: a 64-bit LCG draws a permutation of 0..255 (and each entry's gradient)."""

    def step(value: int) -> int:
        value = (value * _LCG_MULTIPLIER + _LCG_INCREMENT) & _MASK64
        return value - (1 << 64) if value >= 1 << 63 else value

    perm = np.zeros(256, np.int64)
    grad_index = np.zeros(256, np.int64)
    source = list(range(256))
    gradients = len(GRADIENTS3) // 3
    for _ in range(3):
        seed = step(seed)
    for i in range(255, -1, -1):
        seed = step(seed)
        r = (seed + 31) % (i + 1)
        perm[i] = source[r]
        grad_index[i] = (source[r] % gradients) * 3
        source[r] = source[i]
    return perm, grad_index
