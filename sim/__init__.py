"""CoDA simulator SDK: factored scenes (task / layout / attributes) on MuJoCo, with verifiable success predicates.

Trusted code (the agent, the servers, the families) imports from here:

    from sim import Scene, place, inside, grasped

Scene programs write the same imports, but in the sandbox `import sim` gives them `sim.program`, a facade with
the same API over plain data (see `sim.program.PROGRAM_MODULES`).
"""

import os
import sys

# offscreen rendering backend, chosen before mujoco is first imported: EGL on Linux (MUJOCO_GL=osmesa without a
# GPU driver); macOS and Windows keep MuJoCo's native default (sim.render says what to set when none works)
if sys.platform.startswith("linux"):
    os.environ.setdefault("MUJOCO_GL", "egl")

# the public names load on first use, so `sim.constants` and the CLI's --help stay light
_EXPORTS = {
    "grasped": "sim.predicates", "inside": "sim.predicates", "lifted": "sim.predicates", "near": "sim.predicates",
    "on": "sim.predicates", "open_fraction": "sim.predicates", "stacked": "sim.predicates",
    "upright": "sim.predicates", "ObjectHandle": "sim.scene", "Scene": "sim.scene", "SceneError": "sim.scene",
    "SceneSplit": "sim.scene", "place": "sim.scene", "SceneSpec": "sim.spec",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
