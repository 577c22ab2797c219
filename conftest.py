"""Test-wide setup: pick the offscreen GL backend before any test module imports mujoco."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
