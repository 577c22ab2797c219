"""Headless offscreen rendering (EGL, or OSMesa with MUJOCO_GL=osmesa) to PNG."""

import io

import numpy as np
from PIL import Image

from sim.families import sample_spec
from sim.render import render_spec_png


def test_render_two_cameras_to_png():
    png = render_spec_png(sample_spec("pick_place", 0), size=96)
    img = np.asarray(Image.open(io.BytesIO(png)))
    assert img.shape == (96, 192, 3)
    assert img.std() > 5  # not a blank frame
    assert len(png) < 1_000_000
