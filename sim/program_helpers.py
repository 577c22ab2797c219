"""The helpers that potential programs get: `from sim import helpers as h` in a program imports this module
(see `sim.program.PROGRAM_MODULES`), not `sim.helpers`.

A program's `complete_k(state)` / `potential_k(state)` receive a `SceneState` view: an opaque object whose only
field is private. These functions unwrap it, call the function of the same name in `sim.helpers` on the live
simulator state, and return plain values: floats, bools, tuples, sets of names, and `Vec` / `Mat` (tuples of
floats with numpy-like arithmetic) for positions, rotations and boxes. The values are the ones `sim.helpers`
computes, converted exactly (`float(np.float64)` is the same number).
"""

from __future__ import annotations

import typing as _typing

from sim import helpers as _helpers
from sim.program_values import Mat as _Mat
from sim.program_values import Vec as _Vec
from sim.program_values import _sealed
from sim.program_values import guarded as _guarded

if _typing.TYPE_CHECKING:
    from sim.program_values import Mat, Vec

del annotations  # the __future__ feature is not part of the facade


@_sealed
class SceneState:
    """The simulator state a potential program is evaluated on; pass it to the helpers (it has no attributes)."""

    __slots__ = ("_state",)
    __hash__ = None  # object's default hash is its address (see sim.sandbox.child)

    def __init__(self, *args, **kwargs):
        raise TypeError("programs cannot make a SceneState; the runtime passes one to complete_k and potential_k")

    def __setattr__(self, name, value):
        raise AttributeError("SceneState is read-only")

    def __delattr__(self, name):
        raise AttributeError("SceneState is read-only")

    def __repr__(self) -> str:
        return "<SceneState>"


_STATE = SceneState.__dict__["_state"]


def _view(state) -> SceneState:
    """Trusted: the view of a live `sim.helpers.SceneState` that is handed to a program."""
    if not isinstance(state, _helpers.SceneState):
        raise TypeError(f"expected a sim.helpers.SceneState, got {type(state).__name__}")
    view = object.__new__(SceneState)
    _STATE.__set__(view, state)
    return view


def _state(view):
    if type(view) is not SceneState:
        raise TypeError(f"helpers take the state passed to complete_k / potential_k, got {type(view).__name__}")
    return _STATE.__get__(view)


def _name(name) -> str:
    if type(name) is not str:
        raise TypeError(f"object names are strings such as 'mug' (or 'table', 'gripper'), got {type(name).__name__}")
    return name


def _vec(array) -> Vec:
    return _Vec._raw(array.tolist())


def _mat(array) -> Mat:
    return _Mat._raw([_Vec._raw(row) for row in array.tolist()])


# --- poses -----------------------------------------------------------------------------------------------


def position(state: SceneState, name: str) -> Vec:
    """World position (x, y, z) of an object's centre (rigid) or of its handle (articulated)."""
    return _vec(_helpers.position(_state(state), _name(name)))


def rotation(state: SceneState, name: str) -> Mat:
    """3x3 rotation matrix of the object's body (columns: its x, y, z axes in the world)."""
    return _mat(_helpers.rotation(_state(state), _name(name)))


def bottom_z(state: SceneState, name: str) -> float:
    """Lowest point of the object's bounding box in the world."""
    return float(_helpers.bottom_z(_state(state), _name(name)))


def top_z(state: SceneState, name: str) -> float:
    """Highest point of the object's bounding box in the world."""
    return float(_helpers.top_z(_state(state), _name(name)))


def distance(state: SceneState, a: str, b: str) -> float:
    """Distance between the centres (handles) of `a` and `b`."""
    return float(_helpers.distance(_state(state), _name(a), _name(b)))


def xy_distance(state: SceneState, a: str, b: str) -> float:
    """Horizontal distance between the centres (handles) of `a` and `b`."""
    return float(_helpers.xy_distance(_state(state), _name(a), _name(b)))


def lift_height(state: SceneState, name: str) -> float:
    """How far the object's bottom is above where it started (metres)."""
    return float(_helpers.lift_height(_state(state), _name(name)))


def is_upright(state: SceneState, name: str, tol_deg: float = 20.0) -> bool:
    """The object's up axis is within `tol_deg` degrees of vertical."""
    return bool(_helpers.is_upright(_state(state), _name(name), float(tol_deg)))


def tilt_deg(state: SceneState, name: str) -> float:
    """Angle between the object's up axis and the vertical, in degrees."""
    return float(_helpers.tilt_deg(_state(state), _name(name)))


# --- gripper ---------------------------------------------------------------------------------------------


def gripper_position(state: SceneState) -> Vec:
    """World position (x, y, z) of the gripper's tool centre point."""
    return _vec(_helpers.gripper_position(_state(state)))


def finger_gap(state: SceneState) -> float:
    """Distance between the finger pads (metres)."""
    return float(_helpers.finger_gap(_state(state)))


def tcp_distance(state: SceneState, name: str) -> float:
    """Distance from the tool centre point to the object's centre (or handle)."""
    return float(_helpers.tcp_distance(_state(state), _name(name)))


# --- contacts --------------------------------------------------------------------------------------------


def contact_objects(state: SceneState, name: str) -> set[str]:
    """Names of everything touching `name` ('table', 'gripper' or object names)."""
    return {str(n) for n in _helpers.contact_objects(_state(state), _name(name))}


def in_contact(state: SceneState, a: str, b: str) -> bool:
    """`a` and `b` touch ('table' and 'gripper' are names too)."""
    return bool(_helpers.in_contact(_state(state), _name(a), _name(b)))


def fingers_touching(state: SceneState, name: str) -> tuple[bool, bool]:
    """(left finger touches `name`, right finger touches `name`)."""
    left, right = _helpers.fingers_touching(_state(state), _name(name))
    return bool(left), bool(right)


def is_grasped(state: SceneState, name: str) -> bool:
    """Both finger pads touch the object."""
    return bool(_helpers.is_grasped(_state(state), _name(name)))


def max_penetration(state: SceneState) -> tuple[float, str, str]:
    """Deepest interpenetration among scene objects, the table and the gripper: (depth m, name, name)."""
    depth, a, b = _helpers.max_penetration(_state(state))
    return float(depth), str(a), str(b)


# --- relations -------------------------------------------------------------------------------------------


def interior_box(state: SceneState, name: str) -> tuple[Vec, Mat, Vec] | None:
    """(world centre, rotation, half sizes) of the object's cavity, or None if it has none."""
    box = _helpers.interior_box(_state(state), _name(name))
    if box is None:
        return None
    center, rot, half = box
    return _vec(center), _mat(rot), _vec(half)


def is_inside(state: SceneState, a: str, container: str) -> bool:
    """`a`'s centre is over the cavity of `container` and its bottom lies between the floor and the rim."""
    return bool(_helpers.is_inside(_state(state), _name(a), _name(container)))


def is_on(state: SceneState, a: str, support: str, xy_margin: float = 0.01) -> bool:
    """`a` rests on top of `support`: touching it, centred over its footprint, bottom near its top."""
    return bool(_helpers.is_on(_state(state), _name(a), _name(support), xy_margin=float(xy_margin)))


def open_fraction(state: SceneState, name: str) -> float:
    """Joint opening of an articulated object as a fraction of its range (0 closed, 1 fully open)."""
    return float(_helpers.open_fraction(_state(state), _name(name)))


for _function in list(globals()):  # numpy's and MuJoCo's exceptions may carry live objects: programs see builtins
    if not _function.startswith("_") and _function != "SceneState" and callable(globals()[_function]):
        globals()[_function] = _guarded(globals()[_function])
del _function

__all__ = [
    "SceneState", "position", "rotation", "bottom_z", "top_z", "distance", "xy_distance", "lift_height",
    "is_upright", "tilt_deg", "gripper_position", "finger_gap", "tcp_distance", "contact_objects", "in_contact",
    "fingers_touching", "is_grasped", "max_penetration", "interior_box", "is_inside", "is_on", "open_fraction",
]


def __getattr__(name: str):
    raise AttributeError(f"sim.helpers has no {name!r}; programs may use: {', '.join(__all__)}")
