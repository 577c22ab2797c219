"""Control gap v2 (a diagnostic, issue 22): a rate-taught policy's robosuite episodes replayed open-loop in their
mirror here, with this simulator's hand and with the Panda, to find where the two simulators part.

For each robosuite episode (seed group 6, read by no earlier experiment): the policy runs closed loop on robosuite
(chunks kept, the TCP, finger opening and objects after each chunk); the same chunks then run open-loop in the
episode's mirror in this simulator (mirror v1's Lift mirror: the same cube, size, yaw, start of the hand, and the
adapter's gripper rate) under variants: `hand` (this simulator's gripper, the command as a finger opening),
`hand_sign` (the command's sign, as robosuite's gripper takes it: with the rate 0.4 the fingers' target moves
towards fully open / closed at robosuite's speed), `panda_sign` (robosuite's Panda model driven by this simulator's
operational-space law), `panda_sign_rs_cube` (and robosuite's cube mass and friction). The policy also runs closed
loop in each variant.
Read per chunk: the TCP gap, the finger-opening gap, the cube's rise; per episode: success on each side.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v2/replay.py /tmp/gmap-rate-s9.pt --n 24 \
        --out experiments/control_gap_v2/lift-s9.json
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from policy.checkpoint import load_checkpoint
from policy.data import collate_obs
from policy.external.evaluate import episode_seeds
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import chunk_fn
from policy.text import get_embedder
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO
from sim.env import CodaEnv

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mirror_v1", ROOT / "experiments" / "mirror_v1" / "mirror.py")
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)
GROUP = 6
RS_CUBE = {"mass": 0.075, "friction": 1.0}
"""robosuite Lift's cube (docs/RESULTS.md, session 28: 75 g, sliding friction 1.0)"""
VARIANTS = ("hand", "hand_sign", "panda_sign", "panda_sign_rs_cube")


def say(msg: str) -> None:
    print(f"[control_gap_v2 {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read(obs: dict) -> dict:
    tok, pro = np.asarray(obs[OBS_OBJECTS])[0], np.asarray(obs[OBS_PROPRIO])
    return {"tcp": pro[0:3].round(4).tolist(), "quat": pro[3:7].round(4).tolist(), "open": round(float(pro[10]), 3),
            "cube": tok[0:3].round(4).tolist()}


def variant_spec(spec, variant: str):
    if variant.startswith("hand"):
        return spec
    spec = spec.with_robot("panda")
    if variant.endswith("rs_cube"):
        objs = tuple(a.model_copy(update=RS_CUBE) if a.object == "block" else a for a in spec.attributes.objects)
        spec = spec.model_validate({**spec.model_dump(), "attributes": {"objects": [o.model_dump() for o in objs]}})
    return spec


def signed(c: np.ndarray, sign: bool) -> np.ndarray:
    """The chunk as robosuite's gripper takes it (`sign`): its gripper command replaced by its sign."""
    if not sign:
        return c
    c = c.copy()
    c[:, 6] = np.where(c[:, 6] > 0, 1.0, -1.0)
    return c


def replay(spec, chunks: list[np.ndarray], sign: bool) -> tuple[list[dict], bool]:
    env = CodaEnv(spec)
    path, info = [read(env.reset())], {"success": False}
    for c in chunks:
        o, _, term, trunc, info = env.step_chunk(signed(c[:CHUNK], sign))
        path.append(read(o))
        if term or trunc:
            break
    return path, bool(info["success"])


def closed_loop(spec, chunk, sign: bool) -> bool:
    env = CodaEnv(spec)
    o, done, info = env.reset(), False, {"success": False}
    while not done:
        o, _, term, trunc, info = env.step_chunk(signed(chunk(o)[:CHUNK], sign))
        done = term or trunc
    return bool(info["success"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    sha = hashlib.sha256(Path(args.checkpoint).read_bytes()).hexdigest()[:16]
    state = load_checkpoint(args.checkpoint)
    act, emb = chunk_fn(state.policy, mode="mean"), get_embedder()

    def chunk(obs):
        return act(collate_obs([obs], emb, "cpu")).detach().cpu().numpy()[0]

    adapter = RobosuiteAdapter("Lift")
    rows = []
    t0 = time.time()
    try:
        for seed in episode_seeds(args.n, 1, GROUP):
            obs = adapter.reset(seed=seed)
            objects, start = adapter.start_objects(), adapter.start_robot()
            rs_tok = np.asarray(obs[OBS_OBJECTS])[0]
            spec = M.mirror_spec(objects, {k: start[k] for k in ("pos", "quat", "opening")}, list(rs_tok[3:7]), seed)
            spec = spec.with_start({**spec.start.model_dump(), "gripper_rate": start["gripper_rate"]})
            chunks, path, done = [], [read(obs)], False
            while not done:
                c = chunk(obs)
                chunks.append(c)
                obs, _, term, trunc, info = adapter.step_chunk(c[:CHUNK])
                path.append(read(obs))
                done = term or trunc
            row = {"seed": seed, "cube": objects[0], "cube_quat": rs_tok[3:7].round(4).tolist(), "start": start,
                   "robosuite": {"success": bool(info["success"]), "path": path}, "chunks": [c[:CHUNK].round(4).tolist() for c in chunks]}
            for v in VARIANTS:
                vs = variant_spec(spec, v)
                sign = "sign" in v
                p, ok = replay(vs, chunks, sign)
                row[v] = {"replay_success": ok, "path": p, "closed_loop_success": closed_loop(vs, chunk, sign)}
            rows.append(row)
            say(f"seed {seed}: robosuite {row['robosuite']['success']}; replay " +
                ", ".join(f"{v} {row[v]['replay_success']}" for v in VARIANTS) + "; closed loop " +
                ", ".join(f"{v} {row[v]['closed_loop_success']}" for v in VARIANTS) + f" ({time.time() - t0:.0f} s)")
            Path(args.out).write_text(json.dumps({"commit": commit, "checkpoint": args.checkpoint, "sha256_16": sha,
                                                  "group": GROUP, "rs_cube": RS_CUBE, "rows": rows}) + "\n")
    finally:
        adapter.close()


if __name__ == "__main__":
    main()
