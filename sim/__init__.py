"""CoDA simulator SDK: factored scenes (task / layout / attributes) on MuJoCo, with verifiable success predicates.

Trusted code (the agent, the servers, the families) imports from here:

    from sim import Scene, place, inside, grasped

Scene programs write the same imports, but in the sandbox `import sim` gives them `sim.program`, a facade with
the same API over plain data (see `sim.program.PROGRAM_MODULES`).
"""

import os
import sys

GL_BACKENDS = {"linux": ("egl", "osmesa", "glfw"), "darwin": ("cgl", "glfw")}.get(sys.platform, ("wgl", "glfw"))
"""the MUJOCO_GL values for offscreen rendering on this platform"""
_GL_ALIASES = ("", "enable", "enabled", "on", "true", "1", "disable", "disabled", "off", "false", "0", "glx")
"""other values MuJoCo accepts (glx only on Linux); with any other value it does not import at all"""
_GL_LIBRARIES = {"egl": "EGL", "osmesa": "OSMesa"}
"""the library a Linux backend loads when MuJoCo is imported (it does not import when the library is missing)"""


def _loads(library: str) -> bool:
    """Whether lib<library>.so loads under one of the names PyOpenGL tries."""
    import ctypes

    for suffix in ("", *(f".{i}" for i in range(9, -1, -1))):
        try:
            ctypes.CDLL(f"lib{library}.so{suffix}")
            return True
        except OSError:
            continue
    return False


def _choose_gl_backend() -> str | None:
    """Set MUJOCO_GL before mujoco is first imported; returns why offscreen rendering cannot work, or None.

    On Linux EGL, else OSMesa, whichever library loads (an explicit MUJOCO_GL is kept); macOS and Windows keep
    MuJoCo's native default. A value MuJoCo does not know, or a backend whose library is missing, would stop
    MuJoCo from importing at all, so simulation goes on without rendering (MUJOCO_GL=disable) and `sim.render`
    raises the reason."""
    linux = sys.platform.startswith("linux")
    valid = f"valid values: {', '.join(GL_BACKENDS)}"
    if linux and "MUJOCO_GL" not in os.environ:
        found = next((b for b, lib in _GL_LIBRARIES.items() if _loads(lib)), None)
        os.environ["MUJOCO_GL"] = found or "disable"
        return None if found else (f"MUJOCO_GL is unset and neither libEGL (a GPU driver) nor libOSMesa "
                                   f"(apt install libosmesa6) loads; install one or set MUJOCO_GL=glfw with a "
                                   f"display ({valid})")
    value = os.environ.get("MUJOCO_GL", "")
    backend = value.lower().strip()
    if backend not in (*GL_BACKENDS, *(_GL_ALIASES if linux else _GL_ALIASES[:-1])):
        problem = f"MUJOCO_GL={value!r} is not a rendering backend on {sys.platform}; {valid} (or unset it)"
    elif linux and backend in _GL_LIBRARIES and not _loads(_GL_LIBRARIES[backend]):
        problem = f"MUJOCO_GL={value} needs lib{_GL_LIBRARIES[backend]}, which does not load here; {valid}"
    else:
        return None
    os.environ["MUJOCO_GL"] = "disable"
    return problem


GL_PROBLEM = _choose_gl_backend()
"""why offscreen rendering cannot work in this process (set when `sim` is imported), or None"""

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
