"""CoDA simulator SDK: factored scenes (task / layout / attributes) on MuJoCo, with verifiable success predicates.

Trusted code (the agent, the servers, the families) imports from here:

    from sim import Scene, place, inside, grasped

Scene programs write the same imports, but in the sandbox `import sim` gives them `sim.program`, a facade with
the same API over plain data (see `sim.program.PROGRAM_MODULES`).
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
