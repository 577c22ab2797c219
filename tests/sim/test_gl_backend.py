"""Without a working OpenGL backend, rendering fails with one line naming MUJOCO_GL and the values to use, and
simulation still works (MuJoCo would not even import with an unknown MUJOCO_GL or a missing backend library)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import sim

RENDER = """
from sim.env import CodaEnv
from sim.families import sample_spec
from sim.render import RenderUnavailable, render_spec_png

spec = sample_spec("pick_place", 0)
env = CodaEnv(spec)
env.reset()
env.step([0, 0, 0, 0, 0, 0, -1.0])  # simulation works without rendering
try:
    render_spec_png(spec, size=32)
except RenderUnavailable as exc:
    print(exc)
else:
    print("rendered")
"""


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env={**base, **env})


def test_an_unknown_backend_gives_one_line_naming_mujoco_gl_and_the_valid_values():
    out = run([sys.executable, "-c", RENDER], MUJOCO_GL="bogus")
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert "\n" not in message and message.startswith("offscreen rendering is unavailable: MUJOCO_GL='bogus'")
    assert f"valid values: {', '.join(sim.GL_BACKENDS)}" in message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glfw needs no display elsewhere")
def test_a_backend_that_cannot_make_a_context_names_what_to_set():
    out = run([sys.executable, "-c", RENDER], MUJOCO_GL="glfw")  # no DISPLAY: glfw cannot make a context
    message = out.stdout.strip()
    assert "\n" not in message and message.startswith("offscreen rendering is unavailable with MUJOCO_GL=glfw (")
    assert "set MUJOCO_GL to one that works here: egl (" in message and "osmesa (" in message


def test_coda_sim_render_prints_the_reason_on_one_line(tmp_path):
    out = run([sys.executable, "-m", "coda.cli", "sim", "render", "--family", "pick_place", "--out",
               str(tmp_path / "x.png")], MUJOCO_GL="bogus")
    assert out.returncode == 2 and not (tmp_path / "x.png").exists()
    assert out.stderr.strip().splitlines() == [
        f"coda sim: error: offscreen rendering is unavailable: MUJOCO_GL='bogus' is not a rendering backend on "
        f"{sys.platform}; valid values: {', '.join(sim.GL_BACKENDS)} (or unset it)"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libraries are probed on Linux only")
def test_a_missing_backend_library_turns_rendering_off_with_the_reason(monkeypatch):
    monkeypatch.setattr(sim, "_loads", lambda library: library == "OSMesa")
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    assert sim._choose_gl_backend() is None and os.environ["MUJOCO_GL"] == "osmesa"  # the default falls back
    monkeypatch.setenv("MUJOCO_GL", "egl")
    assert sim._choose_gl_backend() == "MUJOCO_GL=egl needs libEGL, which does not load here; valid values: egl, osmesa, glfw"
    assert os.environ["MUJOCO_GL"] == "disable"
    monkeypatch.setattr(sim, "_loads", lambda library: False)
    monkeypatch.delenv("MUJOCO_GL")
    assert "neither libEGL (a GPU driver) nor libOSMesa" in sim._choose_gl_backend()
    assert os.environ["MUJOCO_GL"] == "disable"
