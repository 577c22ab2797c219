"""Compile a `SceneSpec` into MuJoCo: spec → `MjSpec` → `MjModel`, plus a symbol table for the helpers.

Compilation is deterministic: it reads only the spec (all randomness was resolved when the spec was made).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mujoco
import numpy as np

from sim import assets, mjlog
from sim.assets.types import ArticulatedAsset, RigidAsset
from sim.constants import ROBOTS, ROLES, TIMESTEP
from sim.robot import FloatingGripper, GripperIndex
from sim.spec import SceneSpec

DROP_GAP = 0.002
"""objects start this far above their support"""
FLOOR = -1


@dataclass
class ObjectIndex:
    """Where one spec object lives in the compiled model."""

    name: str
    role: str
    category: str
    category_index: int
    asset: RigidAsset | ArticulatedAsset
    scale: float
    articulated: bool
    body: int
    """free body (rigid) or fixed base body (articulated)"""
    geoms: np.ndarray
    half_extent: np.ndarray
    """scaled half sizes of the bounding box"""
    free_qpos: int = -1
    free_dof: int = -1
    moving_body: int = -1
    joint: int = -1
    joint_qpos: int = -1
    joint_dof: int = -1
    joint_range: tuple[float, float] = (0.0, 0.0)
    handle_site: int = -1
    interior_site: int = -1
    center_site: int = -1
    initial_z: float = 0.0


@dataclass
class CompiledScene:
    spec: SceneSpec
    mjspec: mujoco.MjSpec
    model: mujoco.MjModel
    objects: dict[str, ObjectIndex]
    gripper: GripperIndex
    table_geom: int
    geom_owner: np.ndarray
    """object slot (order of `objects`) owning each geom; -1 table, -2 gripper, -3 other"""
    role_onehot: np.ndarray = field(repr=False, default=None)


def new_world() -> mujoco.MjSpec:
    """An empty tabletop world with fast-rendering defaults, lights and two cameras."""
    spec = mujoco.MjSpec()
    spec.modelname = "coda_scene"
    spec.compiler.degree = False  # joint ranges and angles are radians throughout the SDK
    opt = spec.option
    opt.timestep = TIMESTEP
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    opt.impratio = 10.0
    vis = spec.visual
    vis.quality.shadowsize = 0
    vis.quality.offsamples = 0
    vis.global_.offwidth = 640
    vis.global_.offheight = 480
    vis.headlight.ambient = [0.45, 0.45, 0.45]
    vis.headlight.diffuse = [0.5, 0.5, 0.5]
    wb = spec.worldbody
    wb.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[1.2, 1.2, 0.05],
        pos=[0.5, 0, 0],
        rgba=[0.72, 0.62, 0.5, 1],
        friction=[1.0, 0.005, 0.0001],
    )
    wb.add_light(name="top", pos=[0.5, 0, 1.5], dir=[0, 0, -1], castshadow=False)
    wb.add_camera(name="front", pos=[-0.25, 0.0, 0.75], xyaxes=[0, -1, 0, 0.62, 0, 0.78], fovy=55)
    wb.add_camera(name="side", pos=[0.5, -0.95, 0.6], xyaxes=[1, 0, 0, 0, 0.55, 0.83], fovy=55)
    return spec


def _yaw_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def support_top(spec: SceneSpec, name: str, cache: dict[str, float] | None = None) -> float:
    """World z of the surface an object resting on `name` would sit on (0 for the table)."""
    if name == "table":
        return 0.0
    cache = {} if cache is None else cache
    if name in cache:
        return cache[name]
    attrs = spec.attributes.of(name)
    asset = assets.get_asset(attrs.asset)
    place = spec.layout.placement(name)
    if isinstance(asset, ArticulatedAsset):
        inner = asset.interior
        top = attrs.scale * ((inner.center[2] - inner.half[2]) if inner else 2 * asset.half_extent[2])
    else:
        base = support_top(spec, place.support, cache) + DROP_GAP
        top = base + asset.top_z * attrs.scale
    cache[name] = top
    return top


def make_robot(name: str):
    """The robot class of an embodiment name (`sim.constants.ROBOTS`)."""
    if name == "panda":
        from sim.panda import PandaArm

        return PandaArm()
    if name == "gripper":
        return FloatingGripper()
    raise ValueError(f"unknown robot {name!r}; valid robots: {', '.join(ROBOTS)}")


def require_robot(name: str) -> None:
    """ValueError (one line naming the fix) when robot `name` cannot be built here: unknown, or the Panda without
    robosuite's model installed."""
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; valid robots: {', '.join(ROBOTS)}")
    if name == "panda":
        from sim.panda import PandaUnavailable, assets_dir

        try:
            assets_dir()
        except PandaUnavailable as exc:
            raise ValueError(str(exc)) from None


def compile_scene(spec: SceneSpec, robot=None) -> CompiledScene:
    """Build the MuJoCo model of a scene (with the robot it names, unless `robot` is given); raises
    `ValueError` naming the object on bad assets."""
    mjlog.install()  # MuJoCo's warnings about this scene's simulation go to logging, not to ./MUJOCO_LOG.TXT
    robot = robot or make_robot(spec.robot)
    mj = new_world()
    robot.add_to(mj)
    z_cache: dict[str, float] = {}
    for obj in spec.task.objects:
        attrs = spec.attributes.of(obj.name)
        asset = assets.get_asset(attrs.asset)
        place = spec.layout.placement(obj.name)
        if asset.category != obj.category:
            raise ValueError(f"{obj.name}: asset {asset.id} is a {asset.category}, the task says {obj.category}")
        if isinstance(asset, ArticulatedAsset):
            assets.build_articulated(
                mj.worldbody,
                asset,
                obj.name,
                pos=[place.x, place.y, 0.0],
                yaw=place.yaw,
                scale=attrs.scale,
                damping=attrs.damping,
                joint_range=attrs.joint_range,
                rgba=attrs.rgba,
            )
        else:
            z = support_top(spec, place.support, z_cache) + DROP_GAP
            assets.build_rigid(
                mj.worldbody,
                asset,
                obj.name,
                pos=[place.x, place.y, z],
                quat=_yaw_quat(place.yaw),
                scale=attrs.scale,
                mass=attrs.mass,
                friction=attrs.friction,
                rgba=attrs.rgba,
            )
    model = mj.compile()
    return _index(spec, mj, model, robot)


def _index(spec: SceneSpec, mj: mujoco.MjSpec, model: mujoco.MjModel, robot) -> CompiledScene:
    def nid(kind, name):
        return mujoco.mj_name2id(model, kind, name)

    objects: dict[str, ObjectIndex] = {}
    owner = np.full(model.ngeom, -3, dtype=np.int64)
    table = nid(mujoco.mjtObj.mjOBJ_GEOM, "table")
    owner[table] = -1
    grip = robot.index(model)
    owner[grip.geoms] = -2
    for slot, obj in enumerate(spec.task.objects):
        attrs = spec.attributes.of(obj.name)
        asset = assets.get_asset(attrs.asset)
        art = isinstance(asset, ArticulatedAsset)
        body = nid(mujoco.mjtObj.mjOBJ_BODY, obj.name)
        bodies = [body]
        idx = ObjectIndex(
            name=obj.name,
            role=obj.role,
            category=obj.category,
            category_index=assets.category_index(obj.category),
            asset=asset,
            scale=attrs.scale,
            articulated=art,
            body=body,
            geoms=np.empty(0, dtype=np.int64),
            half_extent=np.asarray(asset.half_extent, dtype=np.float64) * attrs.scale,
        )
        if art:
            idx.moving_body = nid(mujoco.mjtObj.mjOBJ_BODY, f"{obj.name}/moving")
            bodies.append(idx.moving_body)
            idx.joint = nid(mujoco.mjtObj.mjOBJ_JOINT, f"{obj.name}/joint")
            idx.joint_qpos = int(model.jnt_qposadr[idx.joint])
            idx.joint_dof = int(model.jnt_dofadr[idx.joint])
            idx.joint_range = (float(model.jnt_range[idx.joint][0]), float(model.jnt_range[idx.joint][1]))
            idx.handle_site = nid(mujoco.mjtObj.mjOBJ_SITE, f"{obj.name}/handle")
            idx.interior_site = nid(mujoco.mjtObj.mjOBJ_SITE, f"{obj.name}/interior")
        else:
            j = nid(mujoco.mjtObj.mjOBJ_JOINT, f"{obj.name}/free")
            idx.free_qpos = int(model.jnt_qposadr[j])
            idx.free_dof = int(model.jnt_dofadr[j])
            idx.center_site = nid(mujoco.mjtObj.mjOBJ_SITE, f"{obj.name}/center")
        idx.geoms = np.flatnonzero(np.isin(model.geom_bodyid, bodies))
        owner[idx.geoms] = slot
        objects[obj.name] = idx
    roles = np.zeros((len(objects), len(ROLES)), dtype=np.float32)
    for slot, o in enumerate(objects.values()):
        roles[slot, ROLES.index(o.role)] = 1.0
    return CompiledScene(
        spec=spec,
        mjspec=mj,
        model=model,
        objects=objects,
        gripper=grip,
        table_geom=table,
        geom_owner=owner,
        role_onehot=roles,
    )
