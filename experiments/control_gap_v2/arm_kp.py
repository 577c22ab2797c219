"""Control gap v2: how stiff must this simulator's Panda be to follow the same actions as robosuite's does?

robosuite's per-action TCP path from steps.py's file against this simulator's Panda (`panda_sign` mirror) with its
joint impedance `sim.panda.JOINT_KP` scaled by each factor; and, with `--closed-loop CKPT`, the policy closed loop
in the mirror at each stiffness (does a robosuite-like arm bring the mirror's success down to robosuite's?).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v2/arm_kp.py experiments/control_gap_v2/steps-lift-s9.json \
        --scales 1,0.5,0.25,0.125 --closed-loop /tmp/gmap-rate-s9.pt --out experiments/control_gap_v2/arm_kp-s9.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np

import sim.panda as P
from policy.checkpoint import load_checkpoint
from policy.data import collate_obs
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import chunk_fn
from policy.text import get_embedder
from sim.env import CodaEnv

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("control_gap_v2", ROOT / "experiments" / "control_gap_v2" / "replay.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)
KP = P.JOINT_KP


def mirror(r: dict, start: dict, objects: list[dict]):
    spec = R.M.mirror_spec(objects, {k: start[k] for k in ("pos", "quat", "opening")}, r["cube_quat"], r["seed"])
    return R.variant_spec(spec.with_start({**spec.start.model_dump(), "gripper_rate": start["gripper_rate"]}),
                          "panda_sign")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("steps")
    ap.add_argument("--scales", default="1,0.5,0.25,0.125")
    ap.add_argument("--closed-loop", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = json.load(open(args.steps))["rows"]
    raw = {r["seed"]: r for r in json.load(open(json.load(open(args.steps))["raw"]))["rows"]}
    chunk = None
    if args.closed_loop:
        act, emb = chunk_fn(load_checkpoint(args.closed_loop).policy, mode="mean"), get_embedder()

        def chunk(obs):
            return act(collate_obs([obs], emb, "cpu")).detach().cpu().numpy()[0]
    specs = {}
    adapter = RobosuiteAdapter("Lift")
    try:
        for r in rows:
            adapter.reset(seed=r["seed"])
            specs[r["seed"]] = mirror(raw[r["seed"]], adapter.start_robot(), adapter.start_objects())
    finally:
        adapter.close()
    out = {"steps": args.steps, "closed_loop": args.closed_loop, "joint_kp": KP, "scales": {}}
    for scale in [float(s) for s in args.scales.split(",")]:
        P.JOINT_KP = KP * scale
        gap, by_t, success = [], {}, []
        for r in rows:
            env = CodaEnv(specs[r["seed"]])
            env.reset()
            for t, a in enumerate(R.signed(np.asarray(r["actions"]), True), start=1):
                if t >= len(r["robosuite"]):
                    break
                o, _, term, trunc, _ = env.step(a)
                g = 100 * float(np.linalg.norm(np.subtract(r["robosuite"][t]["tcp"], R.read(o)["tcp"])))
                gap.append(g)
                by_t.setdefault(t, []).append(g)
                if term or trunc:
                    break
            if chunk is not None:
                success.append(R.closed_loop(specs[r["seed"]], chunk, True))
        out["scales"][scale] = {"gap_mean_cm": round(float(np.mean(gap)), 3), "gap_median_cm": round(float(np.median(gap)), 3),
                                "gap_by_action_cm": [round(float(np.mean(by_t[t])), 2) for t in sorted(by_t)][:16],
                                "closed_loop_success": [int(s) for s in success]}
        print(f"kp × {scale}: TCP gap {np.mean(gap):.2f} cm (median {np.median(gap):.2f}); by action "
              f"{' '.join(f'{np.mean(by_t[t]):.1f}' for t in sorted(by_t)[:12])}; closed loop {sum(success)}/{len(success)}",
              flush=True)
    P.JOINT_KP = KP
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
