"""Gripper speed v1 (a diagnostic for issue 22): the full-proxy policies in their mirror (the robosuite evaluation
episodes' full proxies in this simulator, as full proxy v1) with this simulator's gripper command as it is, or
moving as robosuite's Panda gripper moves: robosuite turns any command into a step of 0.2 of its range per 20 Hz
control step towards open or closed by its sign (`PandaGripper.format_action`, speed 0.2), so a full close takes
10 control steps (5 of this project's actions), where this simulator's fingers get the commanded target at once.
If the mirror falls to robosuite's level under robosuite's gripper, the gripper's speed is the gap.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/gripper_speed_v1/probe.py /tmp/full-s10.pt --seed 10 --out experiments/gripper_speed_v1/raw-s10.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import torch

from policy.checkpoint import load_checkpoint
from policy.rollout import chunk_fn, rollout
from sim.constants import OBS_PROPRIO

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("full_proxy_v1", ROOT / "experiments" / "full_proxy_v1" / "run.py")
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)
STEP = 0.4
"""robosuite's gripper: 0.2 of its range per control step, 2 control steps per action of this project"""


def robosuite_gripper(act):
    """The chunk's gripper commands replaced by what robosuite's Panda gripper would hold after each action: from
    the last applied command (proprio[11]), STEP towards the sign of each commanded value."""
    def wrapped(batch):
        chunk = act(batch).clone()
        prev = batch[OBS_PROPRIO][:, 11].clone()
        for t in range(chunk.shape[1]):
            prev = torch.clamp(prev + STEP * torch.sign(chunk[:, t, 6]), -1.0, 1.0)
            chunk[:, t, 6] = prev
        return chunk
    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--seed", type=int, required=True, help="the base seed (picks full proxy v1's mirror scenes)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    mirror = []
    for task in F.S.TASKS:
        m, _, _ = F.proxies(task, F.episodes(task, F.S.EXT_N, F.EVAL_GROUP), 700_000 + 1_000 * args.seed, certify=True)
        mirror += [(task, s) for s in m]
    specs = [s for _, s in mirror]
    act = chunk_fn(load_checkpoint(args.checkpoint).policy, mode="mean")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out = {"commit": commit, "checkpoint": args.checkpoint, "tasks": [t for t, _ in mirror], "settings": {}}
    for name, a in (("here", act), ("robosuite_gripper", robosuite_gripper(act))):
        got = [int(ep.success) for i in range(0, len(specs), 32) for ep in rollout(specs[i : i + 32], a)]
        out["settings"][name] = got
        per = {t: round(100 * float(np.mean([x for x, tt in zip(got, out["tasks"], strict=True) if tt == t])), 1)
               for t in F.S.TASKS}
        print(f"{name}: mirror {100 * np.mean(got):.1f} % {per}", flush=True)
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
