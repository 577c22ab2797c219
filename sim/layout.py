"""Resolve placement requests into world poses (σ), honouring supports, `near` relations and clearances."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim import assets
from sim.assets.types import ArticulatedAsset
from sim.spec import AttributeSpec, Placement, TaskObject

if TYPE_CHECKING:
    from sim.scene import PlaceRequest

REGION_LOW = (0.28, -0.30)
REGION_HIGH = (0.64, 0.30)
"""table region for loose objects (world xy, metres)"""
FIXTURE_DEFAULT = (0.76, 0.0, 0.0)
CLEARANCE = 0.015
"""minimum free gap between footprints of objects placed on the table"""


class LayoutError(ValueError):
    """No pose satisfies the request; the message names the object and what to relax."""


def footprint_radius(asset, scale: float) -> float:
    hx, hy = asset.half_extent[:2]
    return math.hypot(hx, hy) * scale


class _Occupancy:
    def __init__(self):
        self.discs: list[tuple[str, float, float, float]] = []
        self.rects: list[tuple[str, float, float, float, float]] = []  # name, xmin, xmax, ymin, ymax

    def free(self, x: float, y: float, r: float, gap: float = CLEARANCE, ignore: str | None = None) -> bool:
        for name, ox, oy, orad in self.discs:
            if name != ignore and math.hypot(x - ox, y - oy) < r + orad + gap:
                return False
        for name, x0, x1, y0, y1 in self.rects:
            if name == ignore:
                continue
            dx = max(x0 - x, 0.0, x - x1)
            dy = max(y0 - y, 0.0, y - y1)
            if math.hypot(dx, dy) < r + gap:
                return False
        return True


def _in_region(x: float, y: float, r: float) -> bool:
    return (
        REGION_LOW[0] - 0.05 <= x - r * 0.5
        and x + r * 0.5 <= REGION_HIGH[0] + 0.08
        and REGION_LOW[1] - 0.08 <= y - r * 0.5
        and y + r * 0.5 <= REGION_HIGH[1] + 0.08
    )


def resolve(
    objects: list[TaskObject],
    attributes: AttributeSpec,
    requests: list[PlaceRequest | None],
    *,
    seed_layout: int | None,
    rng: np.random.Generator,
) -> list[Placement]:
    """Turn requests (None = automatic) into placements, in the objects' order."""
    from sim.scene import PlaceRequest

    by_name = {o.name: o for o in objects}
    asset_of = {a.object: assets.get_asset(a.asset) for a in attributes.objects}
    scale_of = {a.object: a.scale for a in attributes.objects}
    reqs = {o.name: (r or PlaceRequest(object=o.name)) for o, r in zip(objects, requests, strict=True)}
    slots = list(assets.seed_layouts()[seed_layout].slots) if seed_layout is not None else []
    fixture_slot = assets.seed_layouts()[seed_layout].fixture_slot if seed_layout is not None else None
    if slots:
        slots = [slots[i] for i in rng.permutation(len(slots))]
    occ = _Occupancy()
    out: dict[str, Placement] = {}

    def order_key(name: str) -> int:
        r = reqs[name]
        if isinstance(asset_of[name], ArticulatedAsset):
            return 0
        if r.on != "table":
            return 4
        if r.xy is not None:
            return 1
        return 3 if r.near is not None else 2

    pending = sorted(by_name, key=lambda n: (order_key(n), list(by_name).index(n)))
    for name in pending:
        r, asset, scale = reqs[name], asset_of[name], scale_of[name]
        rad = footprint_radius(asset, scale)
        yaw = r.yaw
        if isinstance(asset, ArticulatedAsset):
            x, y, syaw = (*r.xy, 0.0) if r.xy else (fixture_slot or FIXTURE_DEFAULT)
            yaw = syaw if r.yaw is None else r.yaw
            hx, hy = asset.half_extent[0] * scale, asset.half_extent[1] * scale
            # keep the swept volume in front of drawers and doors free as well
            sweep = {"drawer": asset.joint_range[1] * scale + 0.04, "door": 2 * hy}.get(asset.kind, 0.03)
            occ.rects.append((name, x - hx - sweep, x + hx, y - hy, y + hy))
            out[name] = Placement(object=name, x=x, y=y, yaw=yaw)
            continue
        if yaw is None:
            yaw = float(rng.uniform(-0.6, 0.6))
        relation = None
        if r.on != "table":
            if r.on not in by_name:
                raise LayoutError(f"{name} is placed on unknown object {r.on!r}; objects: {list(by_name)}")
            if r.on not in out:
                raise LayoutError(f"{name} rests on {r.on}, which must be placed first (or on the table)")
            base = out[r.on]
            x, y = r.xy if r.xy is not None else _support_xy(base, asset_of[r.on], scale_of[r.on])
            out[name] = Placement(object=name, support=r.on, x=x, y=y, yaw=yaw)
            continue
        if r.xy is not None:
            x, y = r.xy
        elif r.near is not None:
            if r.near not in out:
                raise LayoutError(f"{name} is placed near {r.near!r}, which is not placed on the table")
            other = out[r.near]
            x, y = _near(occ, other, footprint_radius(asset_of[r.near], scale_of[r.near]), rad, r.gap, rng)
            relation = {"near": r.near, "gap": r.gap}
        else:
            x, y = _free_spot(occ, rad, slots, rng, name)
        occ.discs.append((name, x, y, rad))
        out[name] = Placement(object=name, x=float(x), y=float(y), yaw=float(yaw), relation=relation)
    return [out[o.name] for o in objects]


def _support_xy(base: Placement, asset, scale: float) -> tuple[float, float]:
    if isinstance(asset, ArticulatedAsset) and asset.interior is not None:
        c = asset.interior.center
        cy, sy = math.cos(base.yaw), math.sin(base.yaw)
        return base.x + scale * (c[0] * cy - c[1] * sy), base.y + scale * (c[0] * sy + c[1] * cy)
    return base.x, base.y


def _near(occ, other: Placement, r_other: float, rad: float, gap: float, rng) -> tuple[float, float]:
    angles = rng.permutation(24) * (2 * math.pi / 24)
    for extra in (0.0, 0.03, 0.06, 0.1, 0.15):
        dist = r_other + rad + gap + extra
        for angle in angles:
            x, y = other.x + dist * math.cos(angle), other.y + dist * math.sin(angle)
            if _in_region(x, y, rad) and occ.free(x, y, rad, gap=min(CLEARANCE, gap)):
                return x, y
    raise LayoutError(
        f"no free spot {gap:.2f} m from {other.object}; reduce gap or move {other.object} towards the centre"
    )


def _free_spot(occ, rad: float, slots, rng, name: str) -> tuple[float, float]:
    for sx, sy, _ in slots:
        if occ.free(sx, sy, rad) and _in_region(sx, sy, rad):
            return sx, sy
    for _ in range(400):
        x = float(rng.uniform(REGION_LOW[0], REGION_HIGH[0]))
        y = float(rng.uniform(REGION_LOW[1], REGION_HIGH[1]))
        if occ.free(x, y, rad):
            return x, y
    raise LayoutError(
        f"no free table spot for {name} in the region where objects without an explicit xy go (x "
        f"{REGION_LOW[0]:.2f}–{REGION_HIGH[0]:.2f} m, y {REGION_LOW[1]:.2f}–{REGION_HIGH[1]:.2f} m): give it "
        f"place({name}, xy=(x, y)) inside the workspace, or remove objects or use smaller ones")
