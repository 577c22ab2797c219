"""Scenes of this simulator that resemble an external benchmark episode (the external-target loop, issue 22).

An external failure cannot be replayed or varied here, but the data engine can aim at it: `proxy_scene` takes a
seed scene of the external task's family and moves its task objects to where the benchmark put its own at reset
(the adapter's objects in this project's frame, `policy.external.base.WorkerAdapter.start_objects`), sized like
them, with distractors cleared from around them. The targeted and control batches of the mode the critic found
are then variants of that scene, as for any failing scene of this simulator.

Objects are paired by role: the external task's object (role `target`) with the seed scene's first goal object,
its destination (`support`, `receptacle`) with that goal's destination. Only objects standing on the table move;
the target is rescaled to the external object's footprint (its mean horizontal half extent), within `SCALE`;
articulated objects keep their pose and size (a benchmark's door and this project's cabinets differ in more than
pose). Positions are clipped into the layout region. Given the episode's start of the hand (the adapter's
`start_robot`: robosuite's Panda starts lower, tilted and half open), the scene's hand starts there too
(`SceneSpec.start`), so its planner demonstrations begin where the benchmark's episodes do; given the external
task's template (the adapter's `template`: Lift is this project's held-out `pp_lift`), the scene's task is
restated by it (`sim.resample.with_template`). The result is not verified here: the caller verifies it like any
scene.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sim import assets
from sim.assets.types import ArticulatedAsset
from sim.constants import ROLES
from sim.engine.variations import (
    VariationError,
    declutter,
    default_roles,
    radius,
    tagged,
    with_attributes,
    with_placement,
)
from sim.layout import REGION_HIGH, REGION_LOW
from sim.resample import with_template
from sim.spec import RobotStart, SceneSpec

SCALE = (0.6, 1.6)
"""bounds on the target's rescaling (the asset pool's own instances span about this range of sizes)"""
DEST_ROLES = ("support", "receptacle")
Role = Literal[ROLES]  # type: ignore[valid-type]


Coordinate = Annotated[float, Field(ge=-10.0, le=10.0, allow_inf_nan=False)]
"""a position component of an external object (m): finite, within 10 m of the robot's base"""
HalfExtent = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""a half extent of an external object (m): finite, not negative, at most 1 m"""


class ExternalObject(BaseModel):
    """One object of an external episode at reset, in this project's frame (metres, table top at z = 0)."""

    model_config = ConfigDict(extra="forbid")
    role: Role = Field(description="the object's role in the external task (target, support, receptacle, articulated)")
    pos: tuple[Coordinate, Coordinate, Coordinate] = Field(description="position at reset (x, y, z), metres")
    half_extent: tuple[HalfExtent, HalfExtent, HalfExtent] = Field(description="half extents (m)")
    name: str = Field("", max_length=128, description="the benchmark's name for it (informational)")
    category: str = Field("", max_length=128, description="the nearest category of this project's asset pool "
                                                          "(informational)")


def proxy_scene(spec: SceneSpec, objects: list[ExternalObject | dict], *, source: str = "", seed: int = 0,
                start: RobotStart | dict | None = None, template: str = "") -> SceneSpec:
    """`spec` with its task objects where the external episode's `objects` were at reset and, given `start`, its
    hand starting where the episode's did and, given `template`, its task stated by that template of the family
    (robosuite's Lift: `pp_lift`); `source` names the external task in the scene's meta. ValueError when `objects`
    has no target, `start` is not a valid `RobotStart` or the scene's objects do not fit `template`."""
    ext = {o.role: o for o in map(ExternalObject.model_validate, objects)}
    if "target" not in ext and "articulated" not in ext:
        raise ValueError(f"objects: no object with role 'target' or 'articulated' (roles: {sorted(ext)})")
    roles = default_roles(spec)
    if "target" not in roles:
        raise ValueError("the seed scene has no goal object to pair with the external task's object")
    target, dest = roles["target"], roles.get("dest")
    pairs = [(target, ext["target"])] if "target" in ext else []  # an external fixture (door) moves nothing
    dest_ext = next((ext[r] for r in DEST_ROLES if r in ext), None)
    if pairs and dest is not None and dest_ext is not None:
        pairs.append((dest, dest_ext))
    out, moved = spec, []
    for name, o in pairs:
        a = out.attributes.of(name)
        asset = assets.get_asset(a.asset)
        if isinstance(asset, ArticulatedAsset) or out.layout.placement(name).support != "table":
            continue
        if name == target:
            want = float(np.mean(np.asarray(o.half_extent, dtype=np.float64)[:2]))
            own = float(np.mean(np.asarray(asset.half_extent[:2], dtype=np.float64)))
            out = with_attributes(out, name, scale=round(float(np.clip(want / max(own, 1e-4), *SCALE)), 3))
        r = radius(out, name)
        x = float(np.clip(o.pos[0], REGION_LOW[0] + r, REGION_HIGH[0] - r))
        y = float(np.clip(o.pos[1], REGION_LOW[1] + r, REGION_HIGH[1] - r))
        out = with_placement(out, name, x=round(x, 4), y=round(y, 4))
        moved.append(name)
    try:
        out = declutter(out, np.random.default_rng(seed), target, dest)
    except VariationError:
        pass  # nothing crowds the task's objects
    if start is not None:
        out = out.with_start(start)
    if template:
        out = with_template(out, template)
    return tagged(out, "layout", "external_proxy", target=target, external=source, moved=",".join(moved))
