"""Plain data types of the asset pool (the pool itself is built in `sim.assets`).

All lengths are metres, in the asset's local frame: +z up, the asset's bottom at local z = 0, its footprint
centred on the local origin. Geom sizes follow MuJoCo's conventions (half sizes; cylinder = (radius, half height);
capsule = (radius, half length); sphere = (radius,); ellipsoid = three semi-axes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GeomKind = Literal["box", "cylinder", "sphere", "capsule", "ellipsoid"]
Split = Literal["train", "heldout"]


@dataclass(frozen=True)
class Part:
    """One collision + visual primitive of an asset."""

    kind: GeomKind
    size: tuple[float, ...]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    """(w, x, y, z) in the asset frame"""
    rgba: tuple[float, float, float, float] | None = None
    """None = the asset's colour"""


@dataclass(frozen=True)
class Interior:
    """An axis-aligned box (asset frame) that counts as 'inside' the asset (bowl cavity, drawer tray)."""

    center: tuple[float, float, float]
    half: tuple[float, float, float]


@dataclass(frozen=True)
class RigidAsset:
    """One rigid object instance: a free body made of primitive parts."""

    id: str
    """'<category>/<index:03d>', e.g. 'mug/007'"""
    category: str
    parts: tuple[Part, ...]
    mass: float
    """kg, total"""
    friction: float
    """sliding friction coefficient"""
    rgba: tuple[float, float, float, float]
    half_extent: tuple[float, float, float]
    """half size of the axis-aligned bounding box; the box spans z in [0, 2*half_extent[2]]"""
    graspable: bool
    """fits between the open fingers along grasp_axis and is light enough to lift"""
    grasp_axis: Literal["x", "y"] = "y"
    """local axis along which the fingers should close (the narrow side)"""
    top_z: float = 0.0
    """local height of the upper supporting surface (for 'on' and stacking); usually 2*half_extent[2]"""
    interior: Interior | None = None
    """cavity for 'inside' (bowls, pots, baskets, crates); None if the asset is not a container"""
    split: Split = "train"


@dataclass(frozen=True)
class ArticulatedAsset:
    """A fixed base with one moving part on one joint (drawer, hinged door, lid, sliding door)."""

    id: str
    """'<kind>/<index:03d>', e.g. 'drawer/012'"""
    kind: Literal["drawer", "door", "lid", "sliding"]
    category: str
    """same as kind; kept so rigid and articulated assets share lookups"""
    base_parts: tuple[Part, ...]
    """fixed to the world, in the asset frame"""
    moving_parts: tuple[Part, ...]
    """in the moving body's frame (which coincides with the asset frame at joint position 0)"""
    joint_type: Literal["slide", "hinge"]
    joint_axis: tuple[float, float, float]
    """asset frame; positive joint motion opens"""
    joint_pos: tuple[float, float, float]
    """point on the hinge axis (asset frame); ignored for slide joints"""
    joint_range: tuple[float, float]
    """(0, open) in metres or radians; 0 = closed"""
    damping: float
    handle: tuple[float, float, float]
    """grasp point on the handle, moving-body frame"""
    handle_axis: Literal["x", "y", "z"]
    """direction along which the handle bar runs (fingers close across it)"""
    rgba: tuple[float, float, float, float]
    half_extent: tuple[float, float, float]
    """closed-state bounding box half sizes (bottom at z=0)"""
    interior: Interior | None = None
    """cavity inside the moving body (drawer tray) or the base (lid box, cabinet); frame named by interior_on"""
    interior_on: Literal["moving", "base"] = "base"
    split: Split = "train"
    mass: float = 1.0
    """mass of the moving part, kg"""
    friction: float = 1.0


@dataclass(frozen=True)
class Category:
    name: str
    articulated: bool
    graspable: bool
    container: bool
    surface: bool
    """objects can be placed on it (plates, boards, trays, blocks)"""
    dims_low: tuple[float, float, float]
    dims_high: tuple[float, float, float]
    """plausible full bounding-box size range (metres) of its instances"""
    mass_range: tuple[float, float]
    friction_range: tuple[float, float]
    split: Split = "train"
    tags: tuple[str, ...] = field(default_factory=tuple)
    """free labels used by task families, e.g. 'fruit', 'vegetable', 'block', 'kitchen'"""


@dataclass(frozen=True)
class SeedLayout:
    """A reusable arrangement: candidate table slots (world xy) and a yaw per slot."""

    id: int
    slots: tuple[tuple[float, float, float], ...]
    """(x, y, yaw) world frame, at least 8 slots, pairwise >= 0.11 m apart, inside the workspace"""
    fixture_slot: tuple[float, float, float]
    """(x, y, yaw) for a large fixture (cabinet, drawer) at the back of the table"""
    split: Split = "train"
