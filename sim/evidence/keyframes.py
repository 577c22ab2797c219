"""Keyframes of a rollout: PNG images of a few key steps, when offscreen rendering is available."""

from __future__ import annotations

import logging
from pathlib import Path

from sim.evidence.models import Keyframe
from sim.trace import Trace

log = logging.getLogger(__name__)
CAMERA = "front"
SIZE = 224


def render_keyframes(trace: Trace, env, steps: list[tuple[int, str]], out_dir: str | None = None) -> list[Keyframe]:
    """PNG keyframes of `steps` [(step, label)]; [] when rendering is unavailable (no GL)."""
    try:
        from sim.render import Cameras, to_png

        frames = []
        with Cameras(env.model, SIZE) as cams:
            for t, label in steps:
                trace.state_at(t, env)
                frames.append(Keyframe(step=t, label=label, png=to_png(cams.frame(env.data, CAMERA))))
    except Exception as exc:  # noqa: BLE001 - no GL context, missing PIL...: evidence works without images
        log.info("keyframes skipped: %s: %s", type(exc).__name__, exc)
        return []
    if out_dir is not None:
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for k in frames:
            path = folder / f"step{k.step:04d}.png"
            path.write_bytes(k.png or b"")
            k.path = str(path)
    return frames
