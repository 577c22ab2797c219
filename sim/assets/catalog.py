"""Shape recipes of the asset pool: primitive helpers, the rigid category table, articulated fixtures.

Pure geometry on the dataclasses of `sim.assets.types`; `sim.assets` draws instances, splits the pool and
builds MuJoCo bodies. Every recipe places the asset's bottom at z = 0; `finalize` recentres the footprint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from sim.assets.types import Interior, Part

RGBA = tuple[float, float, float, float]
Q_ID = (1.0, 0.0, 0.0, 0.0)
_S = math.sqrt(0.5)
Q_X = (_S, 0.0, _S, 0.0)
"""turns a geom's local z axis onto +x (cylinders and capsules lying along x)"""
Q_Y = (_S, _S, 0.0, 0.0)
"""turns a geom's local z axis onto the y axis"""


def _r(x: float) -> float:
    return float(round(float(x), 6))


def _v(seq: Sequence[float]) -> tuple[float, ...]:
    return tuple(_r(x) for x in seq)


def rgb(code: str, alpha: float = 1.0) -> RGBA:
    """'#rrggbb' or 'rrggbb' -> rgba tuple."""
    code = code.lstrip("#")
    return tuple(round(int(code[i : i + 2], 16) / 255, 4) for i in (0, 2, 4)) + (alpha,)  # type: ignore[return-value]


def palette(codes: str, alpha: float = 1.0) -> tuple[RGBA, ...]:
    return tuple(rgb(c, alpha) for c in codes.split())


BROWN, GREEN, DARK_GREEN = rgb("5b3a1e"), rgb("3f8f2f"), rgb("2d5a1e")
METAL, DARK_METAL, BLACK, WHITE = rgb("b8bcc2"), rgb("5d6168"), rgb("1e1e1e"), rgb("f2f2ee")
CAP_RED, CAP_BLUE, TAN, PAPER = rgb("c0392b"), rgb("2e5fa8"), rgb("c9a26b"), rgb("e8dcc4")


# --- quaternions and bounds ------------------------------------------------------------------


def yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def quat_z_to(d: Sequence[float]) -> tuple[float, float, float, float]:
    """Shortest rotation taking +z onto direction d."""
    d = np.asarray(d, float) / np.linalg.norm(d)
    axis = np.cross((0.0, 0.0, 1.0), d)
    s = np.linalg.norm(axis)
    if s < 1e-12:
        return Q_ID if d[2] > 0 else (0.0, 1.0, 0.0, 0.0)
    ang = math.atan2(s, d[2])
    axis = axis / s * math.sin(ang / 2)
    return (math.cos(ang / 2), *map(float, axis))


def quat_mat(q: Sequence[float]) -> np.ndarray:
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def part_bounds(p: Part) -> tuple[np.ndarray, np.ndarray]:
    """Exact axis-aligned bounds of one primitive in the asset frame."""
    rot = quat_mat(p.quat)
    if p.kind == "box":
        ext = np.abs(rot) @ np.asarray(p.size)
    elif p.kind == "ellipsoid":
        ext = np.sqrt((rot**2) @ np.asarray(p.size) ** 2)
    elif p.kind == "sphere":
        ext = np.full(3, p.size[0])
    else:
        axis = np.abs(rot[:, 2])
        r, h = p.size[0], p.size[1]
        radial = r if p.kind == "capsule" else r * np.sqrt(np.clip(1 - axis**2, 0, 1))
        ext = radial + h * axis
    c = np.asarray(p.pos)
    return c - ext, c + ext


def parts_bounds(parts: Sequence[Part]) -> tuple[np.ndarray, np.ndarray]:
    bounds = [part_bounds(p) for p in parts]
    return np.min([b[0] for b in bounds], axis=0), np.max([b[1] for b in bounds], axis=0)


def part_volume(p: Part) -> float:
    s = p.size
    if p.kind == "box":
        return 8 * s[0] * s[1] * s[2]
    if p.kind == "cylinder":
        return math.pi * s[0] ** 2 * 2 * s[1]
    if p.kind == "capsule":
        return math.pi * s[0] ** 2 * 2 * s[1] + 4 / 3 * math.pi * s[0] ** 3
    if p.kind == "sphere":
        return 4 / 3 * math.pi * s[0] ** 3
    return 4 / 3 * math.pi * s[0] * s[1] * s[2]


# --- part constructors -----------------------------------------------------------------------


def box(pos, half, quat=Q_ID, rgba=None) -> Part:
    return Part("box", _v(half), _v(pos), _v(quat), rgba)


def cyl(pos, r, hh, quat=Q_ID, rgba=None) -> Part:
    return Part("cylinder", _v((r, hh)), _v(pos), _v(quat), rgba)


def ell(pos, semi, quat=Q_ID, rgba=None) -> Part:
    return Part("ellipsoid", _v(semi), _v(pos), _v(quat), rgba)


def capsule(p0, p1, r, rgba=None) -> Part:
    """Capsule around the segment p0-p1."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    return Part("capsule", _v((r, np.linalg.norm(p1 - p0) / 2)), _v((p0 + p1) / 2), _v(quat_z_to(p1 - p0)), rgba)


def box_span(a, b, rgba=None) -> Part:
    """Axis-aligned box spanning corners a and b (any order)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return box((lo + hi) / 2, (hi - lo) / 2, rgba=rgba)


class Shape(NamedTuple):
    parts: list[Part]
    top_z: float | None = None
    """None = top of the bounding box"""
    interior: Interior | None = None


class Finished(NamedTuple):
    parts: tuple[Part, ...]
    half_extent: tuple[float, float, float]
    top_z: float
    interior: Interior | None


def _shift_part(p: Part, d: np.ndarray) -> Part:
    return Part(p.kind, p.size, _v(np.asarray(p.pos) + d), p.quat, p.rgba)


def shift_interior(i: Interior | None, d: np.ndarray) -> Interior | None:
    return None if i is None else Interior(_v(np.asarray(i.center) + d), i.half)


def finalize(shape: Shape) -> Finished:
    """Recentre the footprint on the origin and put the bottom at z = 0."""
    lo, hi = parts_bounds(shape.parts)
    d = np.array([-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]])
    parts = tuple(_shift_part(p, d) for p in shape.parts)
    lo, hi = parts_bounds(parts)
    top = hi[2] if shape.top_z is None else shape.top_z + d[2]
    return Finished(parts, _v((hi - lo) / 2), _r(top), shift_interior(shape.interior, d))


# --- rigid shape recipes (s = full bounding size (x, y, z), bottom at z = 0) -------------------


def _foot(d: float, z0: float = 0.0, x: float = 0.0) -> Part:
    """Small flat disc under a round body so it rests without rolling."""
    return cyl((x, 0, z0 + 0.003), 0.14 * d, 0.003)


def _keel(x0: float, x1: float, r: float) -> Part:
    """Thin flat strip under a body lying along x so it does not roll about its axis."""
    return box(((x0 + x1) / 2, 0, 0.0015), ((x1 - x0) / 2, 0.3 * r, 0.0015))


def fruit(s, rng, *, stem=0.0, stem_rgba=BROWN, stem_r=0.0, crown=0.0) -> Shape:
    """Ellipsoid body (round or lying) with a flat foot, optional stem and leaf crown."""
    sx, sy, sz = s
    body = sz - 0.7 * stem if stem else sz
    parts = [ell((0, 0, body / 2), (sx / 2, sy / 2, body / 2)), _foot(min(sx, sy))]
    if stem:
        parts.append(cyl((0, 0, sz - stem / 2), max(0.0025, stem_r * min(sx, sy)), stem / 2, rgba=stem_rgba))
    if crown:
        parts.append(cyl((0, 0, body - 0.004), crown * min(sx, sy) / 2, 0.002, rgba=GREEN))
    return Shape(parts)


def pear(s, rng) -> Shape:
    sx, sy, sz = s
    h = 0.93 * sz
    return Shape(
        [
            ell((0, 0, 0.3 * h), (sx / 2, sy / 2, 0.3 * h)),
            ell((0, 0, 0.68 * h), (0.33 * sx, 0.33 * sy, 0.32 * h)),
            cyl((0, 0, sz - 0.05 * sz), 0.0028, 0.05 * sz, rgba=BROWN),
            _foot(min(sx, sy)),
        ]
    )


def eggplant(s, rng) -> Shape:
    sx, sy, sz = s
    cl = 0.18 * sx
    bx = sx - 0.6 * cl
    xc = -(sx - bx) / 2
    return Shape(
        [
            ell((xc, 0, sz / 2), (bx / 2, sy / 2, sz / 2)),
            _foot(min(sy, sz), x=xc),
            cyl((sx / 2 - cl / 2, 0, sz / 2), 0.22 * sz, cl / 2, Q_X, rgba=DARK_GREEN),
        ]
    )


def banana(s, rng) -> Shape:
    """Three capsules along a shallow arc lying on the table."""
    sx, sy, sz = s
    r = sz / 2
    half_len, y_lo, y_hi = sx / 2 - r, -(sy / 2 - r), sy / 2 - r
    pts = [(-half_len, y_hi, r), (-half_len / 3, y_lo, r), (half_len / 3, y_lo, r), (half_len, y_hi, r)]
    return Shape([capsule(pts[i], pts[i + 1], r) for i in range(3)])


def log(s, rng, *, stalk=0.0, stalk_rgba=GREEN) -> Shape:
    """Capsule lying along x (cucumber, corn), optional stalk at +x."""
    sx, sy, sz = s
    r = sz / 2
    x1 = sx / 2 - stalk
    parts = [capsule((-sx / 2 + r, 0, r), (x1 - r, 0, r), r), _keel(-sx / 2 + r, x1 - r, r)]
    if stalk:
        parts.append(cyl((sx / 2 - (stalk + 0.006) / 2, 0, r), 0.35 * r, (stalk + 0.006) / 2, Q_X, stalk_rgba))
    return Shape(parts)


def carrot(s, rng) -> Shape:
    sx, sy, sz = s
    r, rt, stub = sz / 2, 0.3 * sz, 0.015
    length = sx - stub
    x0 = -sx / 2 + stub
    return Shape(
        [
            cyl((-sx / 2 + (stub + 0.004) / 2, 0, r), 0.45 * r, (stub + 0.004) / 2, Q_X, GREEN),
            capsule((x0 + r, 0, r), (x0 + 0.55 * length, 0, r), r),
            capsule((x0 + 0.5 * length, 0, r * 0.95), (sx / 2 - rt, 0, rt), rt),
        ]
    )


def stack(s, rng, *, layers) -> Shape:
    """Coaxial vertical stack; layers = (kind 'c' cylinder | 'd' dome, radius frac, height frac, rgba)."""
    r = s[0] / 2
    z, parts = 0.0, []
    for kind, rf, hf, rgba in layers:
        h = hf * s[2]
        if kind == "c":
            parts.append(cyl((0, 0, z + h / 2), rf * r, h / 2, rgba=rgba))
        else:
            parts.append(ell((0, 0, z), (rf * r, rf * r, h), rgba=rgba))
        z += h
    return Shape(parts)


def blocks(s, rng, *, layers=((1.0, 1.0, 1.0, None),), align="center") -> Shape:
    """Vertical stack of boxes; layers = (x frac, y frac, height frac, rgba); align 'center' | 'xmin'."""
    sx, sy, sz = s
    z, parts = 0.0, []
    for fx, fy, fz, rgba in layers:
        h = fz * sz
        x = 0.0 if align == "center" else -sx / 2 + fx * sx / 2
        parts.append(box((x, 0, z + h / 2), (fx * sx / 2, fy * sy / 2, h / 2), rgba=rgba))
        z += h
    return Shape(parts)


def mug(s, rng) -> Shape:
    _, sy, sz = s
    r, reach, t = sy / 2, 0.28 * sy, 0.007
    parts = [cyl((0, 0, sz / 2), r, sz / 2)]
    for zc in (0.3 * sz, 0.76 * sz):
        parts.append(box_span((r - 0.004, -0.006, zc - t / 2), (r + reach, 0.006, zc + t / 2)))
    parts.append(box_span((r + reach - t, -0.006, 0.3 * sz - t / 2), (r + reach, 0.006, 0.76 * sz + t / 2)))
    return Shape(parts)


def ring(rc: float, n: int, wall: float, z0: float, z1: float, rgba=None) -> list[Part]:
    """n boxes forming a polygonal wall whose outer corners touch radius rc (corners on the x and y axes)."""
    apo = rc * math.cos(math.pi / n)
    half_t = rc * math.sin(math.pi / n)
    out = []
    for k in range(n):
        phi = 2 * math.pi * (k + 0.5) / n
        rm = apo - wall / 2
        out.append(
            box(
                (rm * math.cos(phi), rm * math.sin(phi), (z0 + z1) / 2),
                (wall / 2, half_t, (z1 - z0) / 2),
                yaw_quat(phi),
                rgba,
            )
        )
    return out


def ring_box(s, rng, *, n=12, wall=0.006, floor=0.008, tabs=0.0, handle=0.0) -> Shape:
    """Round container (bowl, pot, pan): floor disc + polygonal wall; tabs along y or a handle along +x."""
    d, sz = (s[1] if handle else s[0]), s[2]
    rc = d / 2
    apo = rc * math.cos(math.pi / n)
    parts = [cyl((0, 0, floor / 2), apo - wall / 2, floor / 2)] + ring(rc, n, wall, floor / 2, sz)
    if tabs:
        tl = tabs * d
        for sgn in (-1, 1):
            parts.append(box_span((-0.025, sgn * (rc - 0.004), sz - 0.022), (0.025, sgn * (rc + tl), sz - 0.01)))
    if handle:
        hl = handle * d
        zc = 0.75 * sz
        parts.append(box_span((apo - 0.006, -0.011, zc - 0.006), (rc + hl, 0.011, zc + 0.006), rgba=DARK_METAL))
    inner = (apo - wall) / math.sqrt(2)
    interior = Interior(_v((0, 0, (floor + sz) / 2)), _v((inner, inner, (sz - floor) / 2)))
    return Shape(parts, top_z=floor, interior=interior)


def rect_box(s, rng, *, wall=0.006, floor=0.008, tabs=0.0, slats=False, cavity=True) -> Shape:
    """Rectangular container (crate, bin, basket, tray): floor + four walls; optional slats and end tabs."""
    sx, sy, sz = s
    ox, oy = sx / 2 - tabs, sy / 2
    parts = [box((0, 0, floor / 2), (ox, oy, floor / 2))]
    bands = [(floor / 2, 0.42 * sz), (0.58 * sz, sz)] if slats else [(floor / 2, sz)]
    for z0, z1 in bands:
        for sgn in (-1, 1):
            parts.append(box_span((sgn * ox, -oy, z0), (sgn * (ox - wall), oy, z1)))
            parts.append(box_span((-ox + wall, sgn * oy, z0), (ox - wall, sgn * (oy - wall), z1)))
    if tabs:
        for sgn in (-1, 1):
            parts.append(box_span((sgn * (ox - 0.004), -0.03, sz - 0.022), (sgn * (ox + tabs), 0.03, sz - 0.01)))
    interior = Interior(_v((0, 0, (floor + sz) / 2)), _v((ox - wall, oy - wall, (sz - floor) / 2))) if cavity else None
    return Shape(parts, top_z=floor, interior=interior)


def lego(s, rng) -> Shape:
    sx, sy, sz = s
    body = 0.8 * sz
    nx = int(np.clip(round(2 * sx / sy), 2, 4))
    px, py = sx / nx, sy / 2
    parts = [box((0, 0, body / 2), (sx / 2, sy / 2, body / 2))]
    for i in range(nx):
        for j in range(2):
            xy = (-sx / 2 + px * (i + 0.5), -sy / 2 + py * (j + 0.5))
            parts.append(cyl((*xy, body + 0.1 * sz - 0.0005), 0.3 * min(px, py), 0.1 * sz + 0.0005))
    return Shape(parts, top_z=sz)


def bridge(s, rng) -> Shape:
    sx, sy, sz = s
    leg = 0.25 * sx
    return Shape(
        [
            box_span((-sx / 2, -sy / 2, 0), (-sx / 2 + leg, sy / 2, 0.62 * sz)),
            box_span((sx / 2 - leg, -sy / 2, 0), (sx / 2, sy / 2, 0.62 * sz)),
            box_span((-sx / 2, -sy / 2, 0.6 * sz), (sx / 2, sy / 2, sz)),
        ]
    )


def remote(s, rng) -> Shape:
    sx, sy, sz = s
    parts = [box((0, 0, 0.42 * sz), (sx / 2, sy / 2, 0.42 * sz))]
    for k, fx in enumerate((0.32, 0.12, -0.05, -0.2)):
        parts.append(
            box((fx * sx, 0, 0.9 * sz), (0.035 * sx, 0.2 * sy, 0.1 * sz), rgba=CAP_RED if k == 0 else DARK_METAL)
        )
    return Shape(parts)


def juice_box(s, rng) -> Shape:
    sx, sy, sz = s
    return Shape(
        [
            box((0, 0, 0.45 * sz), (sx / 2, sy / 2, 0.45 * sz)),
            cyl((0.25 * sx, 0.15 * sy, 0.94 * sz), 0.003, 0.06 * sz, rgba=WHITE),
        ]
    )


def toy_car(s, rng) -> Shape:
    sx, sy, sz = s
    rw = 0.25 * sz
    parts = [
        box_span((-sx / 2, -0.4 * sy, 0), (sx / 2, 0.4 * sy, 0.55 * sz)),
        box_span((-0.25 * sx, -0.35 * sy, 0.5 * sz), (0.2 * sx, 0.35 * sy, sz), rgba=rgb("a8d0e6")),
    ]
    for sxn in (-1, 1):
        for syn in (-1, 1):
            parts.append(cyl((sxn * (sx / 2 - rw - 0.005), syn * 0.4 * sy, rw), rw, 0.1 * sy, Q_Y, BLACK))
    return Shape(parts)


def hammer(s, rng) -> Shape:
    sx, sy, sz = s
    rh, rhead = 0.3 * sz, sz / 2
    return Shape(
        [
            cyl((-rhead, 0, rh), rh, sx / 2 - rhead, Q_X),
            cyl((sx / 2 - rhead, 0, rhead), rhead, sy / 2, Q_Y, DARK_METAL),
        ]
    )


def screwdriver(s, rng) -> Shape:
    sx, _, sz = s
    r = sz / 2
    x0, xh, xf, xt = -sx / 2, -sx / 2 + 0.45 * sx, -sx / 2 + 0.5 * sx, sx / 2 - 0.06 * sx
    return Shape(
        [
            cyl(((x0 + xh) / 2, 0, r), r, (xh - x0) / 2, Q_X),
            _keel(x0 + 0.01, xh - 0.01, r),
            cyl(((xh + xf) / 2, 0, r), 0.45 * r, (xf - xh) / 2 + 0.002, Q_X, BLACK),
            cyl(((xf + xt) / 2, 0, r), max(0.0025, 0.15 * r), (xt - xf) / 2 + 0.002, Q_X, METAL),
            box(((xt + sx / 2) / 2, 0, r), ((sx / 2 - xt) / 2, max(0.0035, 0.2 * r), 0.0012), rgba=METAL),
        ]
    )


def flashlight(s, rng) -> Shape:
    sx, _, sz = s
    rh = sz / 2
    rb = 0.8 * rh
    xb = -sx / 2 + 0.7 * sx
    return Shape(
        [
            cyl(((-sx / 2 + xb) / 2, 0, rb), rb, (xb + sx / 2) / 2, Q_X),
            cyl(((xb + sx / 2) / 2, 0, rh), rh, (sx / 2 - xb) / 2, Q_X, DARK_METAL),
            box((-0.05 * sx, 0, 2 * rb), (0.05 * sx, 0.2 * rb, 0.1 * rb), rgba=BLACK),
        ]
    )


def broccoli(s, rng) -> Shape:
    sx, _, sz = s
    rc, ro = 0.32 * sx, 0.28 * sx
    d, zc = 0.5 * sx - ro, sz - rc
    parts = [cyl((0, 0, 0.25 * sz), 0.26 * sx, 0.25 * sz, rgba=rgb("8fbf5a")), ell((0, 0, zc), (rc, rc, rc))]
    for k in range(4):
        a = k * math.pi / 2
        parts.append(ell((d * math.cos(a), d * math.sin(a), zc - 0.1 * sz), (ro, ro, ro)))
    return Shape(parts)


def duck(s, rng) -> Shape:
    sx, sy, sz = s
    rh = 0.24 * sz
    return Shape(
        [
            ell((-0.12 * sx, 0, 0.3 * sz), (0.38 * sx, sy / 2, 0.3 * sz)),
            _foot(min(sx, sy), x=-0.12 * sx),
            ell((0.2 * sx, 0, sz - rh), (rh, rh, rh)),
            box((0.43 * sx, 0, sz - rh), (0.07 * sx, 0.12 * sy, 0.05 * sz), rgba=rgb("e67e22")),
        ]
    )


def tape(s, rng) -> Shape:
    sx, _, sz = s
    return Shape(ring(sx / 2, 8, 0.3 * sx / 2, 0, sz))


def donut(s, rng) -> Shape:
    sx, _, sz = s
    rt = sz / 2
    rc = sx / 2 - rt
    pts = [(rc * math.cos(2 * math.pi * k / 8), rc * math.sin(2 * math.pi * k / 8), rt) for k in range(9)]
    return Shape([capsule(pts[k], pts[k + 1], rt) for k in range(8)])


# --- rigid category table --------------------------------------------------------------------

ShapeFn = Callable[..., Shape]


@dataclass(frozen=True)
class RigidSpec:
    name: str
    shape: ShapeFn
    lo: tuple[float, float, float]
    hi: tuple[float, float, float]
    mass: tuple[float, float]
    friction: tuple[float, float]
    tags: tuple[str, ...]
    colors: tuple[RGBA, ...]
    link: str = ""
    """axes drawn together: 'xy' (round footprint), 'yz' (round section lying along x), 'xyz'"""
    graspable: bool = True
    container: bool = False
    surface: bool = False


def _cs(*layers):
    return partial(stack, layers=layers)


def _bs(*layers, align="center"):
    return partial(blocks, layers=layers, align=align)


FRUIT, VEG, FOOD = ("fruit", "food"), ("vegetable", "food"), ("food",)
KIT, DRINK, BLOCK, TOY = ("kitchen",), ("drink", "kitchen"), ("block", "toy"), ("toy",)
OFFICE, TOOL, HOME = ("office",), ("tool",), ("household",)
RECEPT = ("kitchen", "receptacle")
F_SOFT, F_MID, F_SLIP = (0.6, 0.9), (0.5, 0.8), (0.35, 0.55)


def _spec(name, shape, lo, hi, mass, fr, tags, colors, link="", **flags) -> RigidSpec:
    return RigidSpec(name, shape, lo, hi, mass, fr, tags, palette(colors, flags.pop("alpha", 1.0)), link, **flags)


RIGID_SPECS: tuple[RigidSpec, ...] = (
    # fruit
    _spec("apple", partial(fruit, stem=0.012), (0.06, 0.06, 0.06), (0.07, 0.07, 0.078), (0.12, 0.22), F_MID, FRUIT, "c0392b a93226 7cb342 e2b33c", "xy"),
    _spec("orange", partial(fruit, stem=0.004, stem_rgba=GREEN), (0.06, 0.06, 0.058), (0.07, 0.07, 0.07), (0.13, 0.25), F_MID, FRUIT, "f39c12 e67e22 f5a623", "xy"),
    _spec("lemon", fruit, (0.065, 0.045, 0.045), (0.085, 0.058, 0.058), (0.08, 0.15), F_MID, FRUIT, "f4d03f f7dc6f e9c82a", "yz"),
    _spec("lime", fruit, (0.05, 0.04, 0.04), (0.065, 0.05, 0.05), (0.05, 0.1), F_MID, FRUIT, "7dbb42 5e9e2f 8bc34a", "yz"),
    _spec("peach", partial(fruit, stem=0.004), (0.055, 0.055, 0.052), (0.07, 0.07, 0.068), (0.1, 0.2), F_SOFT, FRUIT, "f5a27a f08a5d e8915c", "xy"),
    _spec("plum", partial(fruit, stem=0.006), (0.04, 0.04, 0.04), (0.055, 0.055, 0.055), (0.05, 0.1), F_MID, FRUIT, "5b2c6f 6c3483 4a235a", "xy"),
    _spec("pear", pear, (0.055, 0.055, 0.085), (0.07, 0.07, 0.11), (0.15, 0.25), F_MID, FRUIT, "c5d86d a9c25d d4ac0d", "xy"),
    _spec("banana", banana, (0.15, 0.045, 0.032), (0.2, 0.065, 0.04), (0.1, 0.2), F_MID, FRUIT, "f7dc6f f4d03f d4e157"),
    _spec("kiwi", fruit, (0.055, 0.045, 0.045), (0.07, 0.055, 0.055), (0.07, 0.11), F_SOFT, FRUIT, "8d6e4a 7b5e3c", "yz"),
    _spec("mango", fruit, (0.1, 0.065, 0.06), (0.13, 0.07, 0.07), (0.2, 0.4), F_MID, FRUIT, "f5b041 e67e22 9ccc65"),
    _spec("avocado", fruit, (0.09, 0.06, 0.06), (0.11, 0.07, 0.07), (0.15, 0.3), F_SOFT, FRUIT, "3e5e2b 2e4a1f 556b2f", "yz"),
    _spec("strawberry", partial(fruit, stem=0.006, stem_rgba=GREEN, crown=0.7), (0.03, 0.03, 0.035), (0.045, 0.045, 0.05), (0.015, 0.04), F_SOFT, FRUIT, "d62728 c0392b e74c3c", "xy"),
    # vegetables
    _spec("tomato", partial(fruit, stem=0.006, stem_rgba=GREEN, crown=0.35), (0.05, 0.05, 0.04), (0.07, 0.07, 0.055), (0.08, 0.18), F_MID, VEG, "e53935 d32f2f f4511e", "xy"),
    _spec("potato", fruit, (0.08, 0.05, 0.04), (0.11, 0.065, 0.05), (0.15, 0.3), F_SOFT, VEG, "c8a165 b5895a d2b48c"),
    _spec("onion", partial(fruit, stem=0.012, stem_rgba=TAN, stem_r=0.06), (0.055, 0.055, 0.06), (0.07, 0.07, 0.08), (0.1, 0.2), F_MID, VEG, "d7a86e 8e3b5e e8d9b5", "xy"),
    _spec("carrot", carrot, (0.14, 0.03, 0.03), (0.2, 0.04, 0.04), (0.05, 0.12), F_MID, VEG, "e67e22 f39c12 d35400", "yz"),
    _spec("cucumber", log, (0.15, 0.04, 0.04), (0.22, 0.05, 0.05), (0.2, 0.4), F_MID, VEG, "2e7d32 388e3c 1b5e20", "yz"),
    _spec("eggplant", eggplant, (0.16, 0.055, 0.055), (0.22, 0.07, 0.07), (0.25, 0.45), F_MID, VEG, "4a235a 5b2c6f 3c1e48", "yz"),
    _spec("corn", partial(log, stalk=0.02), (0.16, 0.045, 0.045), (0.22, 0.055, 0.055), (0.2, 0.35), F_SOFT, VEG, "f4d03f f1c40f f7dc6f", "yz"),
    _spec("bell_pepper", partial(fruit, stem=0.012, stem_rgba=GREEN, stem_r=0.08), (0.055, 0.055, 0.065), (0.07, 0.07, 0.085), (0.12, 0.22), F_MID, VEG, "d32f2f f9a825 43a047 ef6c00", "xy"),
    _spec("mushroom", _cs(("c", 0.45, 0.55, rgb("efe6d8")), ("d", 1.0, 0.45, None)), (0.04, 0.04, 0.035), (0.06, 0.06, 0.05), (0.015, 0.04), F_SOFT, VEG, "c8b49a a1887f d7ccc8", "xy"),
    _spec("broccoli", broccoli, (0.05, 0.05, 0.07), (0.07, 0.07, 0.1), (0.1, 0.25), F_SOFT, VEG, "2e7d32 388e3c 33691e", "xy"),
    _spec("garlic", partial(fruit, stem=0.008, stem_rgba=rgb("e8e0cc")), (0.04, 0.04, 0.04), (0.055, 0.055, 0.05), (0.03, 0.07), F_MID, VEG, "f2ecdf e8e0cc ddd3c0", "xy"),
    _spec("zucchini", partial(log, stalk=0.012), (0.16, 0.04, 0.04), (0.22, 0.055, 0.055), (0.2, 0.35), F_MID, VEG, "4c7a2a 3d6b1f 6b8e23", "yz"),
    _spec("sweet_potato", fruit, (0.12, 0.05, 0.045), (0.16, 0.065, 0.055), (0.2, 0.4), F_SOFT, VEG, "a0522d 8b4513 b5651d"),
    # other food
    _spec("egg", fruit, (0.055, 0.042, 0.042), (0.064, 0.048, 0.048), (0.05, 0.07), F_SLIP, FOOD, "f5ebe0 e8d5b7 fdf6ec", "yz"),
    _spec("bread_roll", fruit, (0.08, 0.055, 0.04), (0.11, 0.07, 0.055), (0.04, 0.09), F_SOFT, FOOD, "c68642 b5763a d4a05a"),
    _spec("cheese", _bs((1, 1, 0.34, None), (0.72, 1, 0.33, None), (0.44, 1, 0.33, None), align="xmin"), (0.07, 0.045, 0.035), (0.11, 0.065, 0.05), (0.1, 0.25), F_SOFT, FOOD, "f7c948 f4d03f e8b923"),
    _spec("butter", _bs((1, 1, 0.85, None), (0.96, 0.96, 0.15, rgb("f5f0d0"))), (0.09, 0.055, 0.03), (0.12, 0.068, 0.04), (0.12, 0.25), F_SLIP, FOOD, "f3e5ab f7e7a1"),
    _spec("donut", donut, (0.06, 0.06, 0.03), (0.07, 0.07, 0.036), (0.04, 0.08), F_SOFT, FOOD, "c68642 8d5524 f8bbd0", "xy"),
    _spec("cupcake", _cs(("c", 0.82, 0.55, PAPER), ("d", 1.0, 0.45, None)), (0.05, 0.05, 0.05), (0.065, 0.065, 0.07), (0.04, 0.09), F_SOFT, FOOD, "f8bbd0 fff3e0 6d4c41", "xy"),
    # drinks
    _spec("soda_can", _cs(("c", 0.85, 0.04, METAL), ("c", 1.0, 0.9, None), ("c", 0.85, 0.06, METAL)), (0.064, 0.064, 0.115), (0.068, 0.068, 0.125), (0.33, 0.4), F_SLIP, DRINK, "c0392b 2471a3 27ae60 f1c40f 7d3c98", "xy"),
    _spec("water_bottle", _cs(("c", 1.0, 0.75, None), ("c", 0.7, 0.1, None), ("c", 0.4, 0.07, None), ("c", 0.42, 0.08, CAP_BLUE)), (0.055, 0.055, 0.16), (0.068, 0.068, 0.21), (0.3, 0.55), F_SLIP, DRINK, "aed6f1 d6eaf8 a3e4d7", "xy", alpha=0.7),
    _spec("bottle", _cs(("c", 1.0, 0.6, None), ("c", 0.75, 0.08, None), ("c", 0.4, 0.22, None), ("c", 0.45, 0.1, CAP_RED)), (0.055, 0.055, 0.18), (0.07, 0.07, 0.24), (0.35, 0.7), F_SLIP, DRINK, "1e8449 6e2c00 7b241c 2c3e50", "xy"),
    _spec("juice_box", juice_box, (0.04, 0.03, 0.09), (0.06, 0.045, 0.11), (0.15, 0.25), F_MID, DRINK, "f39c12 27ae60 e74c3c 8e44ad"),
    _spec("milk_carton", _bs((1, 1, 0.82, None), (0.7, 1, 0.1, None), (0.12, 1, 0.08, None)), (0.06, 0.06, 0.12), (0.07, 0.07, 0.2), (0.25, 0.8), F_MID, DRINK, "f4f6f7 d6eaf8 fdebd0", "xy"),
    # kitchen
    _spec("can", _cs(("c", 1.0, 0.97, None), ("c", 0.9, 0.03, METAL)), (0.06, 0.06, 0.07), (0.07, 0.07, 0.115), (0.2, 0.45), F_SLIP, KIT + FOOD, "b03a2e 1f618d 117a65 d68910", "xy"),
    _spec("jar", _cs(("c", 0.95, 0.85, None), ("c", 1.0, 0.15, rgb("c9a227"))), (0.055, 0.055, 0.07), (0.07, 0.07, 0.12), (0.15, 0.45), F_SLIP, KIT, "c39bd3 e59866 f7dc6f 76d7c4", "xy", alpha=0.85),
    _spec("cup", _cs(("c", 0.8, 0.3, None), ("c", 0.9, 0.35, None), ("c", 1.0, 0.35, None)), (0.06, 0.06, 0.07), (0.07, 0.07, 0.1), (0.03, 0.12), F_MID, KIT, "ecf0f1 e74c3c 3498db f1c40f", "xy"),
    _spec("mug", mug, (0.076, 0.06, 0.07), (0.09, 0.07, 0.1), (0.2, 0.4), F_MID, KIT, "ecf0f1 2c3e50 c0392b 16a085 f39c12", "xy"),
    _spec("glass", _cs(("c", 0.85, 0.08, None), ("c", 1.0, 0.92, None)), (0.05, 0.05, 0.08), (0.07, 0.07, 0.13), (0.1, 0.3), F_SLIP, KIT, "d6eaf8 e8f8f5 fdfefe", "xy", alpha=0.5),
    _spec("salt_shaker", _cs(("c", 1.0, 0.78, None), ("d", 1.0, 0.22, METAL)), (0.035, 0.035, 0.07), (0.05, 0.05, 0.1), (0.05, 0.15), F_SLIP, KIT, "fdfefe 2c3e50 d5dbdb", "xy"),
    _spec("spice_jar", _cs(("c", 1.0, 0.82, None), ("c", 1.0, 0.18, CAP_RED)), (0.04, 0.04, 0.08), (0.05, 0.05, 0.11), (0.05, 0.12), F_SLIP, KIT, "a04000 7d6608 196f3d 922b21", "xy"),
    _spec("yogurt_cup", _cs(("c", 0.85, 0.5, None), ("c", 1.0, 0.47, None), ("c", 1.0, 0.03, METAL)), (0.06, 0.06, 0.055), (0.07, 0.07, 0.08), (0.1, 0.2), F_MID, KIT + FOOD, "fdfefe f9e79f f5b7b1 aed6f1", "xy"),
    _spec("sponge", _bs((1, 1, 0.7, None), (1, 1, 0.3, rgb("2e7d32"))), (0.08, 0.055, 0.03), (0.11, 0.07, 0.045), (0.01, 0.03), (0.9, 1.2), KIT + HOME, "f7dc6f f9e79f 5dade2 f5b041"),
    _spec("soap", blocks, (0.075, 0.045, 0.03), (0.1, 0.065, 0.035), (0.08, 0.15), (0.3, 0.5), HOME, "f5eef8 d4efdf fadbd8 d6eaf8"),
    _spec("sauce_bottle", _cs(("c", 1.0, 0.78, None), ("c", 0.6, 0.1, None), ("c", 0.35, 0.12, WHITE)), (0.05, 0.05, 0.15), (0.065, 0.065, 0.2), (0.25, 0.5), F_SLIP, KIT, "c0392b f1c40f 6e2c00", "xy"),
    # blocks
    _spec("block", blocks, (0.04, 0.04, 0.04), (0.06, 0.06, 0.06), (0.03, 0.15), F_SOFT, BLOCK, "e74c3c 3498db 2ecc71 f1c40f 9b59b6 e67e22", "xyz", surface=True),
    _spec("cuboid_block", blocks, (0.06, 0.035, 0.03), (0.1, 0.05, 0.045), (0.04, 0.15), F_SOFT, BLOCK, "e74c3c 3498db 2ecc71 f1c40f 9b59b6", surface=True),
    _spec("cylinder_block", _cs(("c", 1.0, 1.0, None)), (0.04, 0.04, 0.04), (0.06, 0.06, 0.06), (0.03, 0.15), F_SOFT, BLOCK, "e74c3c 3498db 2ecc71 f1c40f", "xy", surface=True),
    _spec("lego_brick", lego, (0.06, 0.03, 0.03), (0.09, 0.045, 0.04), (0.02, 0.06), F_MID, BLOCK, "d32f2f 1976d2 fbc02d 388e3c fafafa", surface=True),
    _spec("dice", blocks, (0.03, 0.03, 0.03), (0.045, 0.045, 0.045), (0.01, 0.05), F_MID, BLOCK, "fafafa c0392b 212121", "xyz", surface=True),
    _spec("rubik_cube", blocks, (0.054, 0.054, 0.054), (0.06, 0.06, 0.06), (0.07, 0.1), F_MID, BLOCK, "212121 1e1e1e", "xyz", surface=True),
    _spec("bridge_block", bridge, (0.08, 0.035, 0.04), (0.12, 0.05, 0.06), (0.04, 0.15), F_SOFT, BLOCK, "d7b98e c8a165 e74c3c 3498db", surface=True),
    _spec("pyramid_block", _bs((1, 1, 0.4, None), (0.66, 0.66, 0.3, None), (0.33, 0.33, 0.3, None)), (0.05, 0.05, 0.04), (0.07, 0.07, 0.06), (0.04, 0.15), F_SOFT, BLOCK, "d7b98e f1c40f 2ecc71 e67e22", "xy"),
    # toys
    _spec("toy_car", toy_car, (0.08, 0.04, 0.035), (0.12, 0.06, 0.05), (0.05, 0.2), F_MID, TOY, "e53935 1e88e5 fdd835 43a047"),
    _spec("ball", fruit, (0.05, 0.05, 0.05), (0.07, 0.07, 0.07), (0.03, 0.15), F_MID, TOY, "e53935 1e88e5 fdd835 8e24aa", "xyz"),
    _spec("tennis_ball", fruit, (0.064, 0.064, 0.064), (0.068, 0.068, 0.068), (0.056, 0.06), F_SOFT, TOY, "d4e157 cddc39", "xyz"),
    _spec("rubber_duck", duck, (0.06, 0.05, 0.05), (0.08, 0.065, 0.07), (0.02, 0.06), F_SOFT, TOY, "fdd835 fbc02d ffeb3b"),
    # office
    _spec("eraser", _bs((1, 1, 0.35, rgb("424242")), (0.96, 0.92, 0.65, None)), (0.1, 0.045, 0.03), (0.13, 0.06, 0.035), (0.03, 0.08), F_SOFT, OFFICE, "d7b98e 1565c0 c62828"),
    _spec("remote", remote, (0.14, 0.04, 0.03), (0.2, 0.055, 0.035), (0.08, 0.18), F_MID, OFFICE + HOME, "212121 424242 9e9e9e"),
    _spec("tape_roll", tape, (0.055, 0.055, 0.03), (0.07, 0.07, 0.05), (0.05, 0.15), F_MID, OFFICE, "bdbdbd a1887f e0e0e0 fdd835", "xy", graspable=False),
    _spec("stapler", _bs((1, 1, 0.45, rgb("37474f")), (0.9, 0.85, 0.55, None), align="xmin"), (0.12, 0.035, 0.045), (0.17, 0.045, 0.065), (0.15, 0.35), F_MID, OFFICE, "c62828 1565c0 212121"),
    _spec("glue_stick", _cs(("c", 1.0, 0.7, None), ("c", 0.98, 0.3, WHITE)), (0.025, 0.025, 0.08), (0.035, 0.035, 0.11), (0.02, 0.05), F_MID, OFFICE, "7b1fa2 1976d2 f57c00", "xy"),
    _spec("sticky_notes", _bs((1, 1, 0.34, rgb("fff176")), (1, 1, 0.33, rgb("f48fb1")), (1, 1, 0.33, None)), (0.05, 0.05, 0.03), (0.07, 0.07, 0.05), (0.03, 0.1), F_SOFT, OFFICE, "81d4fa a5d6a7 ffcc80", "xy"),
    # tools and household
    _spec("screwdriver", screwdriver, (0.15, 0.03, 0.03), (0.22, 0.038, 0.038), (0.05, 0.15), F_MID, TOOL, "d32f2f fbc02d 1976d2", "yz"),
    _spec("hammer", hammer, (0.2, 0.05, 0.03), (0.28, 0.07, 0.036), (0.3, 0.6), F_MID, TOOL, "8d6e63 a1887f d32f2f"),
    _spec("flashlight", flashlight, (0.12, 0.03, 0.03), (0.18, 0.045, 0.045), (0.08, 0.25), F_MID, TOOL + HOME, "212121 c62828 1565c0 fbc02d", "yz"),
    _spec("candle", _cs(("c", 1.0, 0.93, None), ("c", 0.06, 0.07, BLACK)), (0.04, 0.04, 0.06), (0.07, 0.07, 0.12), (0.08, 0.4), F_MID, HOME, "fdfefe f9e79f f5b7b1 d7bde2", "xy"),
    _spec("battery", _cs(("c", 1.0, 0.3, BLACK), ("c", 1.0, 0.65, None), ("c", 0.35, 0.05, METAL)), (0.026, 0.026, 0.045), (0.034, 0.034, 0.061), (0.02, 0.14), F_SLIP, HOME + TOOL, "d4ac0d 2e86c1 c0392b", "xy"),
    # receptacles and supports
    _spec("bowl", ring_box, (0.12, 0.12, 0.05), (0.2, 0.2, 0.08), (0.15, 0.5), F_MID, RECEPT + ("container",), "fdfefe 5dade2 e59866 82e0aa 34495e", "xy", graspable=False, container=True),
    _spec("plate", _cs(("c", 0.7, 0.35, None), ("c", 1.0, 0.65, None)), (0.16, 0.16, 0.015), (0.24, 0.24, 0.025), (0.2, 0.5), F_MID, RECEPT + ("surface",), "fdfefe f2f3f4 aed6f1 f9e79f", "xy", graspable=False, surface=True),
    _spec("platter", _cs(("c", 0.75, 0.3, None), ("c", 1.0, 0.7, None)), (0.22, 0.22, 0.018), (0.3, 0.3, 0.028), (0.3, 0.8), F_MID, RECEPT + ("surface",), "fdfefe d5dbdb f5cba7", "xy", graspable=False, surface=True),
    _spec("tray", partial(rect_box, wall=0.008, floor=0.008, cavity=False), (0.2, 0.14, 0.02), (0.3, 0.22, 0.035), (0.15, 0.5), F_MID, RECEPT + ("surface",), "8d6e63 455a64 b0bec5 d7ccc8", graspable=False, surface=True),
    _spec("basket", partial(rect_box, wall=0.007, tabs=0.02), (0.16, 0.12, 0.06), (0.24, 0.18, 0.1), (0.15, 0.4), F_SOFT, RECEPT + ("container",), "c8a165 a1887f d7b98e", graspable=False, container=True),
    _spec("crate", partial(rect_box, wall=0.008, floor=0.01, slats=True), (0.14, 0.12, 0.07), (0.24, 0.2, 0.12), (0.3, 0.9), F_SOFT, RECEPT + ("container",), "c8a165 8d6e63 546e7a", graspable=False, container=True),
    _spec("pot", partial(ring_box, wall=0.005, floor=0.008, tabs=0.12), (0.13, 0.16, 0.07), (0.19, 0.24, 0.12), (0.5, 1.2), F_SLIP, RECEPT + ("container",), "9e9e9e 616161 b71c1c 1a237e", "xy", graspable=False, container=True),
    _spec("pan", partial(ring_box, wall=0.005, floor=0.006, handle=0.5), (0.2, 0.14, 0.035), (0.29, 0.19, 0.05), (0.4, 1.0), F_SLIP, RECEPT + ("container",), "212121 424242 5d4037", "xy", graspable=False, container=True),
    _spec("cutting_board", blocks, (0.2, 0.14, 0.015), (0.3, 0.2, 0.025), (0.3, 0.9), F_SOFT, RECEPT + ("surface",), "d7b98e c8a165 a1887f eceff1", graspable=False, surface=True),
    _spec("bin", partial(rect_box, wall=0.006), (0.14, 0.12, 0.1), (0.22, 0.2, 0.16), (0.2, 0.6), F_MID, ("household", "receptacle", "container"), "546e7a 1e88e5 43a047 eceff1", graspable=False, container=True),
    _spec("storage_box", partial(rect_box, wall=0.006), (0.16, 0.12, 0.07), (0.24, 0.18, 0.11), (0.15, 0.5), F_MID, ("household", "receptacle", "container"), "d7b98e 90a4ae ef9a9a 80cbc4", graspable=False, container=True),
)

HELDOUT_CATEGORIES = (
    "peach",
    "kiwi",
    "eggplant",
    "donut",
    "juice_box",
    "cuboid_block",
    "rubber_duck",
    "stapler",
    "basket",
    "platter",
)
"""rigid categories held out entirely (unseen-category OOD suites); every task family keeps options here"""


# --- articulated fixtures --------------------------------------------------------------------

ART_KINDS = ("drawer", "door", "lid", "sliding")
ART_DIMS = {
    "drawer": ((0.2, 0.25, 0.12), (0.42, 0.45, 0.35)),
    "door": ((0.2, 0.25, 0.12), (0.42, 0.45, 0.35)),
    "lid": ((0.2, 0.25, 0.12), (0.42, 0.45, 0.35)),
    "sliding": ((0.2, 0.25, 0.12), (0.42, 0.45, 0.35)),
}
"""closed bounding-box ranges (handle included) per kind"""
ART_MASS = (0.2, 1.5)
ART_FRICTION = (0.6, 1.0)
ART_COLORS = palette("d7b98e c8a165 8d6e63 eceff1 b0bec5 607d8b 5d4037 f5f5f5 a5d6a7 90caf9")
GAP = 0.002


class ArtShape(NamedTuple):
    base: list[Part]
    moving: list[Part]
    joint_type: str
    axis: tuple[float, float, float]
    joint_pos: tuple[float, float, float]
    joint_range: tuple[float, float]
    handle: tuple[float, float, float]
    handle_axis: str
    interior: Interior
    interior_on: str


def handle_bar(center, along: str, length: float, bar: float, standoff: float, rgba=METAL) -> list[Part]:
    """Bar on two standoffs protruding toward -x from a face whose front plane is x = center.x + standoff + bar/2."""
    cx, cy, cz = center
    face = cx + bar / 2 + standoff
    half = {"y": (bar / 2, length / 2, bar / 2), "z": (bar / 2, bar / 2, length / 2)}[along]
    parts = [box(center, half, rgba=rgba)]
    for sgn in (-1, 1):
        off = sgn * (length / 2 - 0.005)
        py, pz = (cy + off, cz) if along == "y" else (cy, cz + off)
        parts.append(box_span((cx + bar / 2 - 0.001, py - 0.005, pz - 0.005), (face + 0.001, py + 0.005, pz + 0.005), rgba))
    return parts


def shell(w: float, d: float, h: float, t: float, shelf: bool) -> tuple[list[Part], float]:
    """Open-front cabinet shell centred on the origin (front at x = -d/2); returns parts and the lowest cavity top."""
    xf, xb = -d / 2, d / 2
    parts = [
        box_span((xf, -w / 2, 0), (xb, w / 2, t)),
        box_span((xf, -w / 2, h - t), (xb, w / 2, h)),
        box_span((xf, -w / 2, t), (xb, -w / 2 + t, h - t)),
        box_span((xf, w / 2 - t, t), (xb, w / 2, h - t)),
        box_span((xb - t, -w / 2 + t, t), (xb, w / 2 - t, h - t)),
    ]
    cavity_top = h - t
    if shelf:
        zs = round(h / 2, 6)
        parts.append(box_span((xf + 0.01, -w / 2 + t, zs - t / 2), (xb - t, w / 2 - t, zs + t / 2)))
        cavity_top = zs - t / 2
    return parts, cavity_top


def _handle_dims(rng):
    return rng.uniform(0.012, 0.02), rng.uniform(0.032, 0.042)


def drawer(rng) -> ArtShape:
    w, d, h = rng.uniform(0.25, 0.45), rng.uniform(0.2, 0.32), rng.uniform(0.12, 0.33)
    t, tf = rng.uniform(0.01, 0.015), 0.015
    xf, xb = -d / 2, d / 2
    base, _ = shell(w, d, h, t, shelf=False)
    hd = rng.uniform(0.1, 0.16)
    zb = h - t - hd
    if zb - t > t + 0.03:
        base.append(box_span((xf, -w / 2 + t, zb - t), (xb - t, w / 2 - t, zb)))
        base.append(box_span((xf, -w / 2 + t, t), (xf + t, w / 2 - t, zb - t)))
        face_lo = zb - t / 2 + GAP
    else:
        zb, face_lo, hd = t, GAP, h - 2 * t
    # drawer tray: face panel in front of the shell plus floor, sides and back inside it
    dd = d - t - 0.012
    yi = w / 2 - t - GAP
    wt = 0.008
    z0, ztop = zb + GAP, zb + GAP + 0.75 * (hd - 2 * GAP)
    xf_face = xf - GAP
    mov = [
        box_span((xf_face - tf, -w / 2 + GAP, face_lo), (xf_face, w / 2 - GAP, h - GAP)),
        box_span((xf_face, -yi, z0), (xf + dd, yi, z0 + wt)),
        box_span((xf_face, -yi, z0), (xf + dd, -yi + wt, ztop)),
        box_span((xf_face, yi - wt, z0), (xf + dd, yi, ztop)),
        box_span((xf + dd - wt, -yi, z0), (xf + dd, yi, ztop)),
    ]
    bar, stand = _handle_dims(rng)
    hz = (face_lo + h - GAP) / 2
    handle = (xf_face - tf - stand - bar / 2, 0.0, hz)
    mov += handle_bar(handle, "y", min(rng.uniform(0.08, 0.14), w - 0.08), bar, stand)
    travel = min(rng.uniform(0.12, 0.25), dd - 0.05)
    interior = Interior(_v(((xf + xf + dd - wt) / 2, 0, (z0 + wt + ztop) / 2)), _v(((dd - wt) / 2, yi - wt, (ztop - z0 - wt) / 2)))
    return ArtShape(base, mov, "slide", (-1.0, 0.0, 0.0), _v(handle), (0.0, _r(travel)), _v(handle), "y", interior, "moving")


def _front_cabinet(rng):
    w, d, h = rng.uniform(0.25, 0.45), rng.uniform(0.2, 0.32), rng.uniform(0.12, 0.33)
    t = rng.uniform(0.01, 0.015)
    base, cavity_top = shell(w, d, h, t, shelf=h >= 0.22)
    return w, d, h, t, base, cavity_top


def door(rng) -> ArtShape:
    w, d, h, t, base, ctop = _front_cabinet(rng)
    td = 0.015
    xf = -d / 2
    side = 1.0 if rng.random() < 0.5 else -1.0
    x_out = xf - GAP - td
    mov = [box_span((x_out, -w / 2 + GAP, GAP), (xf - GAP, w / 2 - GAP, h - GAP))]
    bar, stand = _handle_dims(rng)
    handle = (x_out - stand - bar / 2, -side * (w / 2 - GAP - rng.uniform(0.03, 0.045)), h / 2)
    mov += handle_bar(handle, "z", min(rng.uniform(0.07, 0.12), h - 0.05), bar, stand)
    interior = Interior(_v(((xf + 0.005 + d / 2 - t) / 2, 0, (t + ctop) / 2)), _v(((d - t - 0.005) / 2, w / 2 - t, (ctop - t) / 2)))
    rng_open = rng.uniform(1.4, 1.9)
    return ArtShape(base, mov, "hinge", (0.0, 0.0, -side), _v((x_out, side * (w / 2 - GAP), 0.0)), (0.0, _r(rng_open)), _v(handle), "z", interior, "base")


def sliding(rng) -> ArtShape:
    w, d, h, t, base, ctop = _front_cabinet(rng)
    tp = 0.012
    xf = -d / 2
    side = 1.0 if rng.random() < 0.5 else -1.0
    x1 = xf - GAP
    fixed = box_span((x1 - tp, min(0, -side * (w / 2 - GAP)), GAP), (x1, max(0, -side * (w / 2 - GAP)), h - GAP))
    base.append(fixed)
    x2 = x1 - tp - GAP
    ylo, yhi = sorted((side * (w / 2 - GAP), -side * 0.01))
    mov = [box_span((x2 - tp, ylo, GAP), (x2, yhi, h - GAP))]
    bar, stand = _handle_dims(rng)
    handle = (x2 - tp - stand - bar / 2, side * (w / 2 - GAP - rng.uniform(0.03, 0.045)), h / 2)
    mov += handle_bar(handle, "z", min(rng.uniform(0.07, 0.12), h - 0.05), bar, stand)
    travel = rng.uniform(0.75, 0.9) * (w / 2 - 0.01)
    yin = sorted((side * 0.005, side * (w / 2 - t)))
    interior = Interior(_v(((xf + 0.005 + d / 2 - t) / 2, sum(yin) / 2, (t + ctop) / 2)), _v(((d - t - 0.005) / 2, (yin[1] - yin[0]) / 2, (ctop - t) / 2)))
    return ArtShape(base, mov, "slide", (0.0, -side, 0.0), _v(handle), (0.0, _r(travel)), _v(handle), "z", interior, "base")


def lid(rng) -> ArtShape:
    w, d, hb = rng.uniform(0.25, 0.45), rng.uniform(0.2, 0.32), rng.uniform(0.11, 0.31)
    t, tl = rng.uniform(0.01, 0.015), rng.uniform(0.012, 0.02)
    xf, xb = -d / 2, d / 2
    base = [
        box_span((xf, -w / 2, 0), (xb, w / 2, t)),
        box_span((xf, -w / 2, t), (xf + t, w / 2, hb)),
        box_span((xb - t, -w / 2, t), (xb, w / 2, hb)),
        box_span((xf + t, -w / 2, t), (xb - t, -w / 2 + t, hb)),
        box_span((xf + t, w / 2 - t, t), (xb - t, w / 2, hb)),
    ]
    z0 = hb + GAP
    mov = [box_span((xf, -w / 2, z0), (xb, w / 2, z0 + tl))]
    bar, stand = _handle_dims(rng)
    handle = (xf - stand - bar / 2, 0.0, z0 + tl / 2)
    mov += handle_bar(handle, "y", min(rng.uniform(0.08, 0.14), w - 0.08), bar, stand)
    interior = Interior(_v((0, 0, (t + hb) / 2)), _v((d / 2 - t, w / 2 - t, (hb - t) / 2)))
    return ArtShape(base, mov, "hinge", (0.0, 1.0, 0.0), _v((xb, 0.0, z0)), (0.0, _r(rng.uniform(1.4, 1.9))), _v(handle), "y", interior, "base")


ART_BUILDERS: dict[str, Callable[[np.random.Generator], ArtShape]] = {
    "drawer": drawer,
    "door": door,
    "lid": lid,
    "sliding": sliding,
}
