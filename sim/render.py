"""Offscreen rendering to PNG with fast settings (no shadows, no multisampling): EGL by default, OSMesa too."""

from __future__ import annotations

import io
import os

import numpy as np

CAMERAS = ("front", "side")
DEFAULT_SIZE = 224


def _ensure_backend() -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")


def render(model, data, camera: str = "front", size: int = DEFAULT_SIZE) -> np.ndarray:
    """RGB image (size, size, 3) uint8 of one camera."""
    _ensure_backend()
    import mujoco

    with mujoco.Renderer(model, height=size, width=size) as renderer:
        renderer.update_scene(data, camera=camera)
        return renderer.render().copy()


class Cameras:
    """A reusable renderer for many frames of one model (keyframes, videos)."""

    def __init__(self, model, size: int = DEFAULT_SIZE):
        _ensure_backend()
        import mujoco

        self._renderer = mujoco.Renderer(model, height=size, width=size)

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
