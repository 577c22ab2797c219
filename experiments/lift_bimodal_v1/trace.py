"""Lift bimodal v1 (a diagnostic, issue 22): two training replicates of one CoDA cell (external target v3's seed 9,
robosuite Lift 4 %, and external replicate v1's, 88 %) on the same robosuite Lift episodes of the evaluation's seed
group 0, closed loop as the cells' evaluation runs them (mean actions, the adapter's defaults), traced per chunk:
the gripper command of each action, the TCP, the finger opening and the cube.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/lift_bimodal_v1/trace.py --n 12 --out experiments/lift_bimodal_v1/traces.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np

from policy.checkpoint import load_checkpoint
from policy.data import collate_obs
from policy.external.evaluate import episode_seeds
from policy.external.robosuite_tasks import RobosuiteAdapter
from policy.rollout import chunk_fn
from policy.text import get_embedder
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO

ROOT = Path(__file__).resolve().parents[2]
POLICIES = {"A": ROOT / "experiments/external_target_v3/runs/coda-s9/checkpoints/step009000.pt",
            "A_replicate": ROOT / "experiments/external_replicate_v1/runs/coda-s9/checkpoints/step009000.pt"}


def read(obs: dict) -> dict:
    tok, pro = np.asarray(obs[OBS_OBJECTS])[0], np.asarray(obs[OBS_PROPRIO])
    return {"tcp": pro[0:3].round(4).tolist(), "open": round(float(pro[10]), 3), "cube": tok[0:3].round(4).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    emb = get_embedder()
    out = {"commit": commit, "policies": {}, "rows": {}}
    for name, path in POLICIES.items():
        state = load_checkpoint(path)
        act = chunk_fn(state.policy, mode="mean")
        out["policies"][name] = {"path": str(path.relative_to(ROOT)),
                                 "sha256_16": hashlib.sha256(path.read_bytes()).hexdigest()[:16]}
        adapter = RobosuiteAdapter("Lift")
        rows = []
        try:
            for seed in episode_seeds(args.n, 1, 0):
                obs = adapter.reset(seed=seed)
                path_, done = [read(obs)], False
                while not done:
                    c = act(collate_obs([obs], emb, "cpu")).detach().cpu().numpy()[0][:CHUNK]
                    obs, _, term, trunc, info = adapter.step_chunk(c)
                    path_.append({**read(obs), "grip": c[:, -1].round(3).tolist()})
                    done = term or trunc
                rows.append({"seed": seed, "success": bool(info["success"]), "path": path_})
                print(name, seed, rows[-1]["success"], flush=True)
        finally:
            adapter.close()
        out["rows"][name] = rows
    Path(args.out).write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
