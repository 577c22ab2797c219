"""Offscreen rendering to PNG with fast settings (no shadows, no multisampling): EGL on Linux, else OSMesa, the
native OpenGL elsewhere (MUJOCO_GL is chosen in `sim/__init__.py`). Without a working backend every render raises
`RenderUnavailable`, one line naming MUJOCO_GL and the values to set."""

from __future__ import annotations

import io
import os

import numpy as np

import sim

CAMERAS = ("front", "side")
DEFAULT_SIZE = 224
_NEEDS = {"egl": "a GPU driver with libEGL", "osmesa": "libOSMesa, e.g. apt install libosmesa6", "glfw": "a display",
          "cgl": "macOS OpenGL, the default", "wgl": "Windows OpenGL"}


class RenderUnavailable(OSError):
    """No OpenGL context could be made for offscreen rendering."""


def _renderer(model, size: int):
    """A mujoco.Renderer, or RenderUnavailable naming MUJOCO_GL and the values to try on this platform."""
    if sim.GL_PROBLEM:
        raise RenderUnavailable(f"offscreen rendering is unavailable: {sim.GL_PROBLEM}")
    import mujoco

    try:
        return mujoco.Renderer(model, height=size, width=size)
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises several kinds when no GL context can be made
        backend = os.environ.get("MUJOCO_GL", "(unset: the platform default)")
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        choices = ", ".join(f"{b} ({_NEEDS[b]})" for b in sim.GL_BACKENDS)
        raise RenderUnavailable(f"offscreen rendering is unavailable with MUJOCO_GL={backend} ({reason}); "
                                f"set MUJOCO_GL to one that works here: {choices}") from None


def render(model, data, camera: str = "front", size: int = DEFAULT_SIZE) -> np.ndarray:
    """RGB image (size, size, 3) uint8 of one camera."""
    with _renderer(model, size) as renderer:
        renderer.update_scene(data, camera=camera)
        return renderer.render().copy()


class Cameras:
    """A reusable renderer for many frames of one model (keyframes, videos)."""

    def __init__(self, model, size: int = DEFAULT_SIZE):
        self._renderer = _renderer(model, size)

    def frame(self, data, camera: str = "front") -> np.ndarray:
        self._renderer.update_scene(data, camera=camera)
        return self._renderer.render().copy()

    def close(self) -> None:
        self._renderer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def to_png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def side_by_side(images: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(images, axis=1)


def render_spec_png(spec, size: int = DEFAULT_SIZE, cameras=CAMERAS) -> bytes:
    """PNG of a scene at rest (after reset), cameras side by side."""
    from sim.env import CodaEnv

    env = CodaEnv(spec)
    env.reset()
    with Cameras(env.model, size) as cams:
        return to_png(side_by_side([cams.frame(env.data, c) for c in cameras]))
