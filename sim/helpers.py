"""Geometry and contact helpers over simulator state.

One vocabulary for success predicates, the failure critic and Text2potential programs: every helper takes a
`SceneState` and object names from the scene's symbol table, e.g.

    distance(state, "mug", "bowl"); is_grasped(state, "mug"); open_fraction(state, "drawer")
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from sim.compile import CompiledScene, ObjectIndex

TABLE = "table"
GRIPPER = "gripper"


class SceneState:
    """The simulator state of one compiled scene, addressed by object name."""

    def __init__(self, compiled: CompiledScene, data: mujoco.MjData, initial_bottom: dict[str, float] | None = None):
        self.compiled = compiled
        self.model = compiled.model
        self.data = data
        self.objects: dict[str, ObjectIndex] = compiled.objects
        self.names = list(compiled.objects)
        self.initial_bottom = initial_bottom or {}
        self._contact_key: tuple | None = None
        self._pairs: set[tuple[int, int]] = set()
        self._finger_touch: tuple[set[int], set[int]] = (set(), set())

    def obj(self, name: str) -> ObjectIndex:
        try:
            return self.objects[name]
        except KeyError:
            raise KeyError(f"unknown object {name!r}; objects in this scene: {', '.join(self.names)}") from None

    def _contacts(self) -> None:
        key = (self.data.time, self.data.ncon, float(self.data.qpos.sum()))
        if key == self._contact_key:
            return
        self._contact_key = key
        n = self.data.ncon
        owner = self.compiled.geom_owner
        g1 = self.data.contact.geom1[:n]
        g2 = self.data.contact.geom2[:n]
        o1, o2 = owner[g1], owner[g2]
        self._pairs = {(int(min(a, b)), int(max(a, b))) for a, b in zip(o1, o2, strict=True)}
        left, right = self.compiled.gripper.finger_geoms
        touch_l: set[int] = set()
        touch_r: set[int] = set()
        for a, b, oa, ob in zip(g1, g2, o1, o2, strict=True):
            for g, other in ((a, ob), (b, oa)):
                if g in left:
                    touch_l.add(int(other))
                elif g in right:
                    touch_r.add(int(other))
        self._finger_touch = (touch_l, touch_r)

    def slot(self, name: str) -> int:
        if name == TABLE:
            return -1
        if name == GRIPPER:
            return -2
        return self.names.index(self.obj(name).name)


# --- poses -----------------------------------------------------------------------------------------


def position(state: SceneState, name: str) -> np.ndarray:
    """World position of an object's centre (rigid) or of its handle (articulated)."""
    o = state.obj(name)
    site = o.handle_site if o.articulated else o.center_site
    return state.data.site_xpos[site].copy()


def rotation(state: SceneState, name: str) -> np.ndarray:
    o = state.obj(name)
    body = o.moving_body if o.articulated else o.body
    return state.data.xmat[body].reshape(3, 3).copy()


def bottom_z(state: SceneState, name: str) -> float:
    """Lowest point of the object's bounding box in the world."""
    o = state.obj(name)
    if o.articulated:
        return float(state.data.xpos[o.body][2])
    r = state.data.xmat[o.body].reshape(3, 3)
    center = state.data.site_xpos[o.center_site]
    return float(center[2] - np.abs(r[2]) @ o.half_extent)


def top_z(state: SceneState, name: str) -> float:
    o = state.obj(name)
    if o.articulated:
        return float(state.data.xpos[o.body][2] + 2 * o.half_extent[2])
    r = state.data.xmat[o.body].reshape(3, 3)
    center = state.data.site_xpos[o.center_site]
    return float(center[2] + np.abs(r[2]) @ o.half_extent)


def distance(state: SceneState, a: str, b: str) -> float:
    return float(np.linalg.norm(position(state, a) - position(state, b)))


def xy_distance(state: SceneState, a: str, b: str) -> float:
    return float(np.linalg.norm(position(state, a)[:2] - position(state, b)[:2]))


def lift_height(state: SceneState, name: str) -> float:
    """How far the object's bottom is above where it started (metres)."""
    return bottom_z(state, name) - state.initial_bottom.get(name, 0.0)


def is_upright(state: SceneState, name: str, tol_deg: float = 20.0) -> bool:
    z_axis = rotation(state, name)[:, 2]
    return float(z_axis[2]) >= math.cos(math.radians(tol_deg))


def tilt_deg(state: SceneState, name: str) -> float:
    z = float(np.clip(rotation(state, name)[2, 2], -1.0, 1.0))
    return math.degrees(math.acos(z))


# --- gripper ---------------------------------------------------------------------------------------


def gripper_position(state: SceneState) -> np.ndarray:
    return state.data.xpos[state.compiled.gripper.body].copy()


def finger_gap(state: SceneState) -> float:
    """Distance between the finger pads (metres)."""
    ql, qr = state.compiled.gripper.finger_qpos
    return float(state.data.qpos[ql] + state.data.qpos[qr])


def tcp_distance(state: SceneState, name: str) -> float:
    """Distance from the tool centre point to the object's centre (or handle)."""
    return float(np.linalg.norm(gripper_position(state) - position(state, name)))


# --- contacts --------------------------------------------------------------------------------------


def _owner_name(state: SceneState, slot: int) -> str:
    return {-1: TABLE, -2: GRIPPER, -3: "world"}.get(slot) or state.names[slot]


def contact_objects(state: SceneState, name: str) -> set[str]:
    """Names of everything touching `name` ('table', 'gripper' or object names)."""
    state._contacts()
    s = state.slot(name)
    out = set()
    for a, b in state._pairs:
        if a == s and b != s:
            out.add(_owner_name(state, b))
        elif b == s and a != s:
            out.add(_owner_name(state, a))
    return out


def in_contact(state: SceneState, a: str, b: str) -> bool:
    state._contacts()
    sa, sb = state.slot(a), state.slot(b)
    return (min(sa, sb), max(sa, sb)) in state._pairs


def fingers_touching(state: SceneState, name: str) -> tuple[bool, bool]:
    state._contacts()
    s = state.slot(name)
    return s in state._finger_touch[0], s in state._finger_touch[1]


def is_grasped(state: SceneState, name: str) -> bool:
    """Both finger pads touch the object."""
    left, right = fingers_touching(state, name)
    return left and right


def max_penetration(state: SceneState) -> tuple[float, str, str]:
    """Deepest interpenetration among scene objects, the table and the gripper: (depth m, name, name)."""
    worst = (0.0, "", "")
    owner = state.compiled.geom_owner
    for i in range(state.data.ncon):
        c = state.data.contact[i]
        depth = -float(c.dist)
        if depth > worst[0]:
            a, b = owner[c.geom1], owner[c.geom2]
            if a == b:
                continue
            worst = (depth, _owner_name(state, int(a)), _owner_name(state, int(b)))
    return worst


# --- relations -------------------------------------------------------------------------------------


def interior_box(state: SceneState, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(world centre, rotation, half sizes) of the object's cavity, or None if it has none."""
    o = state.obj(name)
    inner = o.asset.interior
    if inner is None:
        return None
    half = np.asarray(inner.half) * o.scale
    if o.articulated:
        return state.data.site_xpos[o.interior_site].copy(), state.data.site_xmat[o.interior_site].reshape(3, 3), half
    r = state.data.xmat[o.body].reshape(3, 3)
    center = state.data.xpos[o.body] + r @ (np.asarray(inner.center) * o.scale)
    return center, r, half


def is_inside(state: SceneState, a: str, container: str) -> bool:
    """`a`'s centre is over the cavity of `container` and its bottom lies between the floor and the rim."""
    box = interior_box(state, container)
    if box is None:
        return False
    center, r, half = box
    local = r.T @ (position(state, a) - center)
    if abs(local[0]) > half[0] or abs(local[1]) > half[1]:
        return False
    floor = center[2] - half[2]
    bottom = bottom_z(state, a)
    return floor - 0.02 <= bottom <= center[2] + half[2]


def is_on(state: SceneState, a: str, support: str, xy_margin: float = 0.01) -> bool:
    """`a` rests on top of `support`: touching it, centred over its footprint, bottom near its top."""
    if support == TABLE:
        return in_contact(state, a, TABLE) and bottom_z(state, a) < 0.01
    s = state.obj(support)
    if not in_contact(state, a, support):
        return False
    if s.articulated:
        return is_inside(state, a, support)
    r = state.data.xmat[s.body].reshape(3, 3)
    local = r.T @ (position(state, a) - state.data.site_xpos[s.center_site])
    hx, hy = s.half_extent[0] + xy_margin, s.half_extent[1] + xy_margin
    if abs(local[0]) > hx or abs(local[1]) > hy:
        return False
    surface = state.data.xpos[s.body][2] + s.asset.top_z * s.scale
    return surface - 0.02 <= bottom_z(state, a) <= surface + 0.03


def open_fraction(state: SceneState, name: str) -> float:
    """Joint opening of an articulated object as a fraction of its range (0 closed, 1 fully open)."""
    o = state.obj(name)
    if not o.articulated:
        raise ValueError(f"{name} is not articulated; open_fraction applies to drawers, doors, lids, sliders")
    lo, hi = o.joint_range
    return float(np.clip((state.data.qpos[o.joint_qpos] - lo) / (hi - lo), 0.0, 1.0))
