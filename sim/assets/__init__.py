"""The procedural asset pool: categories, rigid and articulated instances, seed layouts, MuJoCo builders.

Deterministic: every draw comes from a numpy generator seeded with zlib.crc32 of a name (never Python's
hash()), so the pool is identical on every import. It is built lazily on first use and cached.
Shape recipes and the category table live in `sim.assets.catalog`.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import zlib
from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

import mujoco
import numpy as np

from sim.assets import catalog as cat
from sim.assets.types import ArticulatedAsset, Category, Part, RigidAsset, SeedLayout

INSTANCES_PER_CATEGORY = 20
INSTANCES_PER_KIND = 80
N_LAYOUTS = 500
HELDOUT_FRACTION = 0.2
HELDOUT_LAYOUTS = 100
"""the last HELDOUT_LAYOUTS seed layouts are held out"""
SEED_INSTANCES = {"rigid": 2, "articulated": 8}
"""the "seed" side: the first few train instances of every category (by id) ..."""
SEED_CATEGORY_STRIDE = 3
"""... every third train rigid category (by name; articulated kinds all stay) ..."""
SEED_LAYOUT_STRIDE = 20
"""... and every twentieth train seed layout: the narrow distribution a base policy is trained on (the paper's seed
scenes); the "train" side is everything the data engine may draw from, the "heldout" side the OOD suites'."""
SIDES = ("train", "heldout", "seed")
SLOT_SPACING = 0.11
SLOT_X, SLOT_Y = (0.30, 0.62), (-0.28, 0.28)
FIXTURE_X, FIXTURE_Y, FIXTURE_YAW = (0.74, 0.80), (-0.12, 0.12), 0.15
LAYOUT_STYLES = ("scattered", "grid", "cluster_left", "cluster_right", "cluster_front", "cluster_back", "arc")

_GEOM = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
    "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "ellipsoid": mujoco.mjtGeom.mjGEOM_ELLIPSOID,
}
SITE_GROUP = 5
"""sites added by the builders sit in this (normally hidden) render group"""


class UnknownAssetError(KeyError, ValueError):
    """Unknown asset id or category name (both a KeyError and a ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0])


def _crc(*names: object) -> int:
    return zlib.crc32("/".join(map(str, names)).encode())


def _rng(*names: object) -> np.random.Generator:
    return np.random.default_rng(_crc(*names))


def _shade(rgba: Sequence[float], rng: np.random.Generator) -> tuple[float, float, float, float]:
    k = rng.uniform(0.9, 1.08)
    return tuple(round(float(np.clip(c * k, 0, 1)), 4) for c in rgba[:3]) + (float(rgba[3]),)  # type: ignore[return-value]


def _heldout_indices(name: str, n: int) -> set[int]:
    k = int(round(HELDOUT_FRACTION * n))
    return {int(i) for i in _rng(name, "split").choice(n, k, replace=False)}


# --- rigid -------------------------------------------------------------------------------------


def _rigid_category(spec: cat.RigidSpec) -> Category:
    return Category(
        name=spec.name,
        articulated=False,
        graspable=spec.graspable,
        container=spec.container,
        surface=spec.surface,
        dims_low=spec.lo,
        dims_high=spec.hi,
        mass_range=spec.mass,
        friction_range=spec.friction,
        split="heldout" if spec.name in cat.HELDOUT_CATEGORIES else "train",
        tags=spec.tags,
    )


def _rigid_instance(spec: cat.RigidSpec, idx: int, split: str) -> RigidAsset:
    rng = np.random.default_rng([_crc(spec.name), idx])
    u = rng.random(3)
    if spec.link == "xyz":
        u[:] = u[0]
    elif spec.link == "xy":
        u[1] = u[0]
    elif spec.link == "yz":
        u[2] = u[1]
    lo, hi = np.asarray(spec.lo), np.asarray(spec.hi)
    fin = cat.finalize(spec.shape(lo + u * (hi - lo), rng))
    size_u = float(np.clip(0.75 * u.mean() + 0.25 * rng.random(), 0, 1))
    mass = spec.mass[0] + size_u * (spec.mass[1] - spec.mass[0])
    half = fin.half_extent
    return RigidAsset(
        id=f"{spec.name}/{idx:03d}",
        category=spec.name,
        parts=fin.parts,
        mass=round(mass, 4),
        friction=round(float(rng.uniform(*spec.friction)), 3),
        rgba=_shade(spec.colors[int(rng.integers(len(spec.colors)))], rng),
        half_extent=half,
        graspable=spec.graspable,
        grasp_axis="y" if half[1] <= half[0] else "x",
        top_z=fin.top_z,
        interior=fin.interior,
        split=split,  # type: ignore[arg-type]
    )


# --- articulated -------------------------------------------------------------------------------


def _articulated_category(kind: str) -> Category:
    lo, hi = cat.ART_DIMS[kind]
    return Category(
        name=kind,
        articulated=True,
        graspable=False,
        container=True,
        surface=False,
        dims_low=lo,
        dims_high=hi,
        mass_range=cat.ART_MASS,
        friction_range=cat.ART_FRICTION,
        tags=("articulated", "fixture", kind),
    )


def _shift(p: Part, d: np.ndarray) -> Part:
    return Part(p.kind, p.size, cat._v(np.asarray(p.pos) + d), p.quat, p.rgba)


def _articulated_instance(kind: str, idx: int, split: str) -> ArticulatedAsset:
    rng = np.random.default_rng([_crc(kind), idx])
    sh = cat.ART_BUILDERS[kind](rng)
    lo, hi = cat.parts_bounds(sh.base + sh.moving)
    d = np.array([-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]])
    base = tuple(_shift(p, d) for p in sh.base)
    moving = tuple(_shift(p, d) for p in sh.moving)
    lo, hi = cat.parts_bounds(base + moving)
    return ArticulatedAsset(
        id=f"{kind}/{idx:03d}",
        kind=kind,  # type: ignore[arg-type]
        category=kind,
        base_parts=base,
        moving_parts=moving,
        joint_type=sh.joint_type,  # type: ignore[arg-type]
        joint_axis=sh.axis,
        joint_pos=cat._v(np.asarray(sh.joint_pos) + d),  # type: ignore[arg-type]
        joint_range=sh.joint_range,
        damping=round(math.exp(rng.uniform(math.log(0.05), math.log(2.0))), 4),
        handle=cat._v(np.asarray(sh.handle) + d),  # type: ignore[arg-type]
        handle_axis=sh.handle_axis,  # type: ignore[arg-type]
        rgba=_shade(cat.ART_COLORS[int(rng.integers(len(cat.ART_COLORS)))], rng),
        half_extent=cat._v((hi - lo) / 2),  # type: ignore[arg-type]
        interior=cat.shift_interior(sh.interior, d),
        interior_on=sh.interior_on,  # type: ignore[arg-type]
        split=split,  # type: ignore[arg-type]
        mass=round(float(rng.uniform(*cat.ART_MASS)), 4),
        friction=round(float(rng.uniform(*cat.ART_FRICTION)), 3),
    )


# --- seed layouts ------------------------------------------------------------------------------


def _proposals(style: str, rng: np.random.Generator) -> np.ndarray:
    """Candidate slot centres for one layout style, in preference order."""
    (x0, x1), (y0, y1) = SLOT_X, SLOT_Y
    if style == "grid":
        xs = np.linspace(0.32, 0.58, 3) + rng.uniform(-0.01, 0.01)
        ys = np.linspace(-0.24, 0.24, int(rng.integers(4, 5, endpoint=True)))
        pts = np.array([(x, y) for x in xs for y in ys]) + rng.uniform(-0.008, 0.008, (len(xs) * len(ys), 2))
    elif style == "arc":
        r1 = rng.uniform(0.40, 0.45)
        pts = []
        for r in (r1, r1 + rng.uniform(0.12, 0.14)):
            amax = min(math.asin(0.27 / r), math.acos(0.31 / r))
            step = 2 * math.asin(0.062 / r)
            ang = np.arange(-amax, amax + 1e-9, step)
            ang += (2 * amax - (ang[-1] - ang[0])) * (rng.random() - 0.5)
            pts += [(r * math.cos(a), r * math.sin(a)) for a in ang]
        pts = np.array(pts)
    elif style.startswith("cluster"):
        centre = {"left": (0.46, 0.16), "right": (0.46, -0.16), "front": (0.34, 0.0), "back": (0.58, 0.0)}
        c = np.array(centre[style.split("_")[1]]) + rng.uniform(-0.03, 0.03, 2)
        pts = c + rng.normal(0, (0.09, 0.12), (400, 2))
        pts = pts[np.argsort(np.linalg.norm(pts - c, axis=1))]
    else:
        pts = np.empty((0, 2))
    uniform = np.column_stack([rng.uniform(x0, x1, 600), rng.uniform(y0, y1, 600)])
    return np.vstack([pts, uniform])


def _layout(idx: int) -> SeedLayout:
    rng = _rng("layout", idx)
    style = LAYOUT_STYLES[idx % len(LAYOUT_STYLES)]
    want = int(rng.integers(8, 12, endpoint=True))
    slots: list[tuple[float, float]] = []
    for x, y in _proposals(style, rng).tolist():
        inside = SLOT_X[0] <= x <= SLOT_X[1] and SLOT_Y[0] <= y <= SLOT_Y[1]
        if inside and all(math.hypot(x - qx, y - qy) >= SLOT_SPACING + 2e-4 for qx, qy in slots):
            slots.append((x, y))
            if len(slots) == want:
                break
    if len(slots) < 8:  # pragma: no cover - guarded by tests over all layouts
        raise RuntimeError(f"seed layout {idx} ({style}) packed only {len(slots)} slots")
    yaws = rng.uniform(-3.1415, 3.1415, len(slots))
    fyaw = 0.0 if rng.random() < 0.5 else rng.uniform(-FIXTURE_YAW, FIXTURE_YAW)
    fixture = (rng.uniform(*FIXTURE_X), rng.uniform(*FIXTURE_Y), fyaw)
    return SeedLayout(
        id=idx,
        slots=tuple((round(float(p[0]), 4), round(float(p[1]), 4), round(float(a), 4)) for p, a in zip(slots, yaws, strict=True)),
        fixture_slot=tuple(round(float(v), 4) for v in fixture),  # type: ignore[arg-type]
        split="heldout" if idx >= N_LAYOUTS - HELDOUT_LAYOUTS else "train",
    )


# --- the pool ------------------------------------------------------------------------------------


class _Pool(NamedTuple):
    categories: dict[str, Category]
    rigid: dict[str, RigidAsset]
    articulated: dict[str, ArticulatedAsset]
    layouts: tuple[SeedLayout, ...]
    names: tuple[str, ...]
    """sorted category names (rigid + articulated); the position is category_index"""


@cache
def _pool() -> _Pool:
    cats: dict[str, Category] = {}
    rigid: dict[str, RigidAsset] = {}
    for spec in cat.RIGID_SPECS:
        c = cats[spec.name] = _rigid_category(spec)
        held = set(range(INSTANCES_PER_CATEGORY)) if c.split == "heldout" else _heldout_indices(spec.name, INSTANCES_PER_CATEGORY)
        for i in range(INSTANCES_PER_CATEGORY):
            a = _rigid_instance(spec, i, "heldout" if i in held else "train")
            rigid[a.id] = a
    art: dict[str, ArticulatedAsset] = {}
    for kind in cat.ART_KINDS:
        cats[kind] = _articulated_category(kind)
        held = _heldout_indices(kind, INSTANCES_PER_KIND)
        for i in range(INSTANCES_PER_KIND):
            a = _articulated_instance(kind, i, "heldout" if i in held else "train")
            art[a.id] = a
    layouts = tuple(_layout(i) for i in range(N_LAYOUTS))
    names = tuple(sorted(cats))
    return _Pool({n: cats[n] for n in names}, rigid, art, layouts, names)


def clear_cache() -> None:
    """Forget the built pool (the next call rebuilds it, identically)."""
    _pool.cache_clear()
    _seed_categories.cache_clear()


def categories() -> dict[str, Category]:
    return dict(_pool().categories)


def rigid_assets() -> dict[str, RigidAsset]:
    return dict(_pool().rigid)


def articulated_assets() -> dict[str, ArticulatedAsset]:
    return dict(_pool().articulated)


def seed_layouts() -> list[SeedLayout]:
    return list(_pool().layouts)


def _check_side(split: str | None) -> None:
    if split is not None and split not in SIDES:
        raise ValueError(f"split must be None or one of {', '.join(map(repr, SIDES))}, not {split!r}")


def layouts_on(split: str) -> list[SeedLayout]:
    """The seed layouts of one side ("seed": every SEED_LAYOUT_STRIDE-th train layout)."""
    _check_side(split)
    if split == "seed":
        return [lay for lay in _pool().layouts if lay.split == "train" and lay.id % SEED_LAYOUT_STRIDE == 0]
    return [lay for lay in _pool().layouts if lay.split == split]


@cache
def _seed_categories() -> frozenset[str]:
    pool = _pool()
    rigid = [n for n in pool.names if pool.categories[n].split == "train" and not pool.categories[n].articulated]
    arts = [n for n in pool.names if pool.categories[n].split == "train" and pool.categories[n].articulated]
    return frozenset(rigid[::SEED_CATEGORY_STRIDE] + arts)


def get_category(name: str) -> Category:
    pool = _pool()
    if name in pool.categories:
        return pool.categories[name]
    close = difflib.get_close_matches(str(name), pool.names, n=3)
    hint = f" (did you mean: {', '.join(close)}?)" if close else ""
    raise UnknownAssetError(f"unknown object category {name!r}{hint}; valid categories: {', '.join(pool.names)}")


def get_asset(asset_id: str) -> RigidAsset | ArticulatedAsset:
    pool = _pool()
    found = pool.rigid.get(asset_id) or pool.articulated.get(asset_id)
    if found is not None:
        return found
    close = difflib.get_close_matches(str(asset_id), list(pool.rigid) + list(pool.articulated), n=3)
    hint = f"; did you mean: {', '.join(close)}?" if close else ";"
    raise UnknownAssetError(
        f"unknown asset {asset_id!r}{hint} (ids are '<category>/<index:03d>'; categories: {', '.join(pool.names)})"
    )


def assets_in(category: str, split: str | None = None) -> list[RigidAsset | ArticulatedAsset]:
    """All instances of a category, sorted by id, optionally only one side ("seed": its first train instances)."""
    c = get_category(category)
    _check_side(split)
    pool = _pool()
    source = pool.articulated if c.articulated else pool.rigid
    side = "train" if split == "seed" else split
    out = sorted((a for a in source.values() if a.category == category and side in (None, a.split)), key=lambda a: a.id)
    return out[: SEED_INSTANCES["articulated" if c.articulated else "rigid"]] if split == "seed" else out


def instances_for(category: str, side: str) -> list[RigidAsset | ArticulatedAsset]:
    """The instances a scene on `side` draws a category's objects from: that side's, else (a "seed" side is a
    subset of train) the train side's, else all of them."""
    for s in ((side, "train", None) if side == "seed" else (side, None)):
        if found := assets_in(category, split=s):
            return found
    return []


def categories_with(
    tag: str | None = None,
    graspable: bool | None = None,
    container: bool | None = None,
    surface: bool | None = None,
    split: str | None = None,
    articulated: bool | None = None,
) -> list[Category]:
    """Categories matching every given filter (None = any), sorted by name."""
    out = []
    for c in _pool().categories.values():
        if tag is not None and tag not in c.tags:
            continue
        flags = ((graspable, c.graspable), (container, c.container), (surface, c.surface), (articulated, c.articulated))
        if any(want is not None and want != have for want, have in flags):
            continue
        if split == "seed" and c.name not in _seed_categories():
            continue
        if split is not None and c.split != ("train" if split == "seed" else split):
            continue
        out.append(c)
    return sorted(out, key=lambda c: c.name)


def category_index(name: str) -> int:
    """Stable index of a category among all sorted category names (rigid + articulated)."""
    get_category(name)
    return _pool().names.index(name)


def summary() -> dict[str, int]:
    pool = _pool()
    cats = pool.categories.values()
    return {
        "categories": len(pool.categories),
        "rigid_categories": sum(not c.articulated for c in cats),
        "articulated_categories": sum(c.articulated for c in cats),
        "rigid": len(pool.rigid),
        "articulated": len(pool.articulated),
        "seed_layouts": len(pool.layouts),
        "heldout_categories": sum(c.split == "heldout" for c in cats),
        "heldout_rigid_instances": sum(a.split == "heldout" for a in pool.rigid.values()),
        "heldout_articulated": sum(a.split == "heldout" for a in pool.articulated.values()),
        "heldout_layouts": sum(s.split == "heldout" for s in pool.layouts),
        "train_rigid_instances": sum(a.split == "train" for a in pool.rigid.values()),
    }


def fingerprint() -> str:
    """sha256 over the whole pool's contents: equal fingerprints mean identical pools."""
    pool = _pool()
    h = hashlib.sha256()
    for part in (pool.categories, pool.rigid, pool.articulated, pool.layouts):
        h.update(repr(part).encode())
    return h.hexdigest()


# --- MuJoCo builders -----------------------------------------------------------------------------


def _add_part(body: mujoco.MjsBody, p: Part, name: str, scale: float, rgba, mass: float | None, friction: float):
    geom = body.add_geom(
        name=name,
        type=_GEOM[p.kind],
        size=[s * scale for s in p.size] + [0.0] * (3 - len(p.size)),
        pos=[c * scale for c in p.pos],
        quat=list(p.quat),
        rgba=list(p.rgba if p.rgba is not None else rgba),
        friction=[friction, 0.005, 0.0001],
        condim=4,
    )
    if mass is None:
        geom.density = 500.0
    else:
        geom.mass = mass
    return geom


def _masses(parts: Sequence[Part], total: float) -> list[float]:
    vols = np.array([cat.part_volume(p) for p in parts])
    return [float(v) for v in total * vols / vols.sum()]


def build_rigid(
    parent: mujoco.MjsBody,
    asset: RigidAsset,
    name: str,
    *,
    pos: Sequence[float],
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    scale: float = 1.0,
    mass: float | None = None,
    friction: float | None = None,
    rgba: Sequence[float] | None = None,
) -> mujoco.MjsBody:
    """Add `asset` as a free body `name` under `parent`; `pos` is where the asset's bottom centre goes.

    Geoms are f"{name}/g{i}" (one per part; masses proportional to part volume, summing to `mass`), the
    free joint f"{name}/free", a site f"{name}/center" at the bounding-box centre (and a box site
    f"{name}/interior" for containers). Mass is not scaled with `scale`. `rgba` recolours the
    asset colour; parts with their own colour (stems, caps, handles) keep it.
    """
    body = parent.add_body(name=name, pos=list(pos), quat=list(quat))
    body.add_freejoint(name=f"{name}/free")
    colour = asset.rgba if rgba is None else tuple(rgba)
    fr = asset.friction if friction is None else friction
    for i, (p, m) in enumerate(zip(asset.parts, _masses(asset.parts, asset.mass if mass is None else mass), strict=True)):
        _add_part(body, p, f"{name}/g{i}", scale, colour, m, fr)
    body.add_site(name=f"{name}/center", pos=[0.0, 0.0, asset.half_extent[2] * scale], size=[0.005] * 3, group=SITE_GROUP, rgba=[1, 0, 0, 0.5])
    if asset.interior is not None:
        _interior_site(body, asset.interior, f"{name}/interior", scale)
    return body


def _interior_site(body: mujoco.MjsBody, interior, name: str, scale: float) -> None:
    body.add_site(
        name=name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        pos=[c * scale for c in interior.center],
        size=[h * scale for h in interior.half],
        group=SITE_GROUP,
        rgba=[0, 0, 1, 0.2],
    )


def build_articulated(
    parent: mujoco.MjsBody,
    asset: ArticulatedAsset,
    name: str,
    *,
    pos: Sequence[float],
    yaw: float = 0.0,
    scale: float = 1.0,
    damping: float | None = None,
    joint_range: Sequence[float] | None = None,
    rgba: Sequence[float] | None = None,
) -> tuple[mujoco.MjsBody, mujoco.MjsBody]:
    """Add a fixture: fixed body `name` (geoms f"{name}/g{i}") and child f"{name}/moving" (geoms
    f"{name}/mg{i}") on the joint f"{name}/joint"; sites f"{name}/handle" (moving body) and
    f"{name}/interior" (moving body for drawers, base otherwise). `joint_range` is in joint units (not scaled).
    """
    base = parent.add_body(name=name, pos=list(pos), quat=list(cat.yaw_quat(yaw)))
    colour = asset.rgba if rgba is None else tuple(rgba)
    for i, p in enumerate(asset.base_parts):
        _add_part(base, p, f"{name}/g{i}", scale, colour, None, asset.friction)
    moving = base.add_body(name=f"{name}/moving")
    slide = asset.joint_type == "slide"
    rng = tuple(joint_range) if joint_range is not None else tuple(v * (scale if slide else 1.0) for v in asset.joint_range)
    moving.add_joint(
        name=f"{name}/joint",
        type=mujoco.mjtJoint.mjJNT_SLIDE if slide else mujoco.mjtJoint.mjJNT_HINGE,
        axis=list(asset.joint_axis),
        pos=[c * scale for c in asset.joint_pos],
        range=list(rng),
        limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        damping=asset.damping if damping is None else damping,
        armature=0.005,
    )
    for i, (p, m) in enumerate(zip(asset.moving_parts, _masses(asset.moving_parts, asset.mass), strict=True)):
        _add_part(moving, p, f"{name}/mg{i}", scale, colour, m, asset.friction)
    moving.add_site(name=f"{name}/handle", pos=[c * scale for c in asset.handle], size=[0.006] * 3, group=SITE_GROUP, rgba=[0, 1, 0, 0.5])
    if asset.interior is not None:
        _interior_site(moving if asset.interior_on == "moving" else base, asset.interior, f"{name}/interior", scale)
    return base, moving


__all__ = [
    "UnknownAssetError",
    "articulated_assets",
    "assets_in",
    "build_articulated",
    "build_rigid",
    "categories",
    "categories_with",
    "category_index",
    "clear_cache",
    "fingerprint",
    "get_asset",
    "get_category",
    "rigid_assets",
    "seed_layouts",
    "summary",
]
