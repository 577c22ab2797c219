"""Control gap v2, per action: robosuite's chunks of chosen Lift episodes (from replay.py's raw file) replayed
action by action, on robosuite (the adapter's per-step observations) and in the Panda mirror with the sign gripper
(`panda_sign`), side by side: the TCP, the finger opening and the cube after every action.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v2/steps.py experiments/control_gap_v2/lift-s9.json \
        --out experiments/control_gap_v2/steps-lift-s9.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np

from policy.external.robosuite_tasks import RobosuiteAdapter
from sim.constants import CHUNK
from sim.env import CodaEnv

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("control_gap_v2", ROOT / "experiments" / "control_gap_v2" / "replay.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--chunks", type=int, default=3, help="chunks per episode to trace")
    ap.add_argument("--gain", type=float, default=2.0, help="the adapter's OSC gain (default 2, the adapter's)")
    ap.add_argument("--rot-gain", type=float, default=None, help="a separate gain for the rotation (default: --gain)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = json.load(open(args.raw))["rows"]
    gain = args.gain if args.rot_gain is None else [args.gain] * 3 + [args.rot_gain] * 3
    adapter = RobosuiteAdapter("Lift", gain=gain)
    out = []
    try:
        for r in rows:
            chunks = [np.asarray(c) for c in r["chunks"][: args.chunks]]
            obs = adapter.reset(seed=r["seed"])
            rs = [R.read(obs)]
            for c in chunks:
                adapter.begin_chunk(c[:CHUNK])
                _, _, term, trunc, info = adapter.end_chunk()
                rs += [R.read(o) for o in info["observations"]]
                if term or trunc:
                    break
            objects, start = adapter.start_objects(), adapter.start_robot()
            spec = R.M.mirror_spec(objects, {k: start[k] for k in ("pos", "quat", "opening")}, r["cube_quat"], r["seed"])
            spec = R.variant_spec(spec.with_start({**spec.start.model_dump(), "gripper_rate": start["gripper_rate"]}),
                                  "panda_sign")
            env = CodaEnv(spec)
            here = [R.read(env.reset())]
            for c in chunks:
                for a in R.signed(c[:CHUNK], True):
                    o, _, term, trunc, _ = env.step(a)
                    here.append(R.read(o))
                    if term or trunc:
                        break
                if term or trunc:
                    break
            out.append({"seed": r["seed"], "robosuite_success": r["robosuite"]["success"],
                        "here_success": r["panda_sign"]["replay_success"], "robosuite": rs, "here": here,
                        "actions": [a.round(4).tolist() for c in chunks for a in c[:CHUNK]]})
            print(f"seed {r['seed']}: {len(rs)} / {len(here)} steps", flush=True)
    finally:
        adapter.close()
    Path(args.out).write_text(json.dumps({"raw": args.raw, "gain": gain, "rows": out}) + "\n")


if __name__ == "__main__":
    main()
