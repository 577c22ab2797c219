"""CoDA simulator SDK: factored scenes (task / layout / attributes) on MuJoCo, with verifiable success predicates.

Scene programs import from here:

    from sim import Scene, place, inside, grasped
"""

import os

# offscreen rendering backend; must be chosen before mujoco is first imported (override with MUJOCO_GL=osmesa)
os.environ.setdefault("MUJOCO_GL", "egl")

from sim.predicates import grasped, inside, lifted, near, on, open_fraction, stacked, upright
from sim.scene import ObjectHandle, Scene, SceneError, SceneSplit, place
from sim.spec import SceneSpec

__all__ = [
    "Scene",
    "SceneError",
    "SceneSpec",
    "SceneSplit",
    "ObjectHandle",
    "place",
    "on",
    "inside",
    "grasped",
    "lifted",
    "open_fraction",
    "near",
    "upright",
    "stacked",
]
