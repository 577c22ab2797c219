"""Mirror v1 (a diagnostic, issue 22): robosuite's Lift episodes and their mirror in this simulator.

For each Lift episode (seed group 0): the same cube (position, yaw, half size 2 cm as robosuite's), the same
instruction, the same start of the hand (`SceneSpec.start`) in this simulator. Read: (1) the observations at
reset side by side; (2) the policy's closed-loop episode in robosuite; (3) robosuite's chunks replayed open-loop
here (the TCP after each chunk in both: a control gap shows as a growing distance under identical actions);
(4) the policy's closed-loop episode in the mirror (does it lift here?); (5) the same from this simulator's home.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/mirror_v1/mirror.py CKPT --n 8 --out experiments/mirror_v1/NAME.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

import numpy as np

import sim.scene as S
from policy.checkpoint import load_checkpoint
from policy.data import collate_obs
from policy.external.evaluate import episode_seeds
from policy.external.robosuite_tasks import TASKS, RobosuiteAdapter
from policy.rollout import chunk_fn
from policy.text import get_embedder
from sim import assets
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO
from sim.env import CodaEnv
from sim.predicates import grasped, lifted

ROOT = Path(__file__).resolve().parents[2]


def mirror_spec(objects: list[dict], start: dict, quat: list[float], seed: int):
    """A pick_place scene of this simulator with robosuite Lift's cube where it was, its size, its yaw."""
    cube = objects[0]
    scene = S.Scene("pick_place", seed=seed)
    block = scene.add_object("block", role="target", name="block")
    scene.set_task(TASKS["Lift"].instruction, success=lifted(block, 0.04) & grasped(block), template="pp_lift")
    w, x, y, z = quat
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    scene.set_layout(S.place(block, on="table", xy=(round(cube["pos"][0], 4), round(cube["pos"][1], 4)),
                             yaw=round(yaw, 4)))
    spec = scene.spec()
    own = assets.get_asset(spec.attributes.of("block").asset).half_extent
    want = float(np.mean(cube["half_extent"][:2]))
    scene.set_attributes(block, scale=round(want / float(np.mean(own[:2])), 4))
    scene.set_start(pos=start["pos"], quat=start["quat"], opening=start["opening"])
    return scene.spec()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-rotation", action="store_true", help="zero the chunks' rotation deltas (both simulators)")
    ap.add_argument("--control-freq", type=int, default=None, help="robosuite's control_freq (default: the task's)")
    args = ap.parse_args()
    state = load_checkpoint(ROOT / args.checkpoint if not Path(args.checkpoint).is_absolute() else args.checkpoint)
    act, emb = chunk_fn(state.policy, mode="mean"), get_embedder()

    def chunk(obs):
        c = act(collate_obs([obs], emb, "cpu")).detach().cpu().numpy()[0]
        if args.no_rotation:
            c[:, 3:6] = 0.0
        return c

    adapter = RobosuiteAdapter("Lift", env_kwargs={"control_freq": args.control_freq} if args.control_freq else None)
    rows = []
    try:
        for seed in episode_seeds(args.n, 1, 0):
            obs = adapter.reset(seed=seed)
            objects, start = adapter.start_objects(), adapter.start_robot()
            rs_tok, rs_pro = np.asarray(obs[OBS_OBJECTS])[0], np.asarray(obs[OBS_PROPRIO])
            spec = mirror_spec(objects, start, list(rs_tok[3:7]), seed)
            env = CodaEnv(spec)
            sim_obs = env.reset()
            sim_tok, sim_pro = np.asarray(sim_obs[OBS_OBJECTS])[0], np.asarray(sim_obs[OBS_PROPRIO])
            # (2) closed loop in robosuite, chunks kept
            chunks, rs_tcp, done = [], [rs_pro[0:3].tolist()], False
            while not done:
                c = chunk(obs)
                chunks.append(c)
                obs, _, term, trunc, info = adapter.step_chunk(c[:CHUNK])
                rs_tcp.append(np.asarray(obs[OBS_PROPRIO])[0:3].tolist())
                done = term or trunc
            rs_success = bool(info["success"])
            # (3) the same chunks open-loop here
            env.reset()
            sim_tcp = [np.asarray(env.observe()[OBS_PROPRIO])[0:3].tolist()]
            for c in chunks:
                o, _, term, trunc, _ = env.step_chunk(c[:CHUNK])
                sim_tcp.append(np.asarray(o[OBS_PROPRIO])[0:3].tolist())
                if term or trunc:
                    break
            gap = [round(100 * float(np.linalg.norm(np.subtract(a, b))), 2) for a, b in zip(rs_tcp, sim_tcp, strict=False)]
            # (4) closed loop in the mirror
            o, done, k, mirror_tcp = env.reset(), False, 0, []
            while not done:
                o, _, term, trunc, minfo = env.step_chunk(chunk(o)[:CHUNK])
                mirror_tcp.append(np.asarray(o[OBS_PROPRIO])[0:3].tolist())
                done, k = term or trunc, k + 1
            # (5) the mirror from this simulator's home (the start's share of the gap)
            home_spec = spec.model_copy(update={"start": None})
            henv = CodaEnv(home_spec)
            o, done = henv.reset(), False
            while not done:
                o, _, term, trunc, hinfo = henv.step_chunk(chunk(o)[:CHUNK])
                done = term or trunc
            rs_min = min(float(np.linalg.norm(np.subtract(p, rs_tok[0:3]))) for p in rs_tcp)
            rows.append({
                "seed": seed, "start": start, "cube": objects[0],
                "obs_diff": {"obj_pos_cm": round(100 * float(np.linalg.norm(rs_tok[0:3] - sim_tok[0:3])), 2),
                             "half_extent_rs": rs_tok[13:16].round(4).tolist(), "half_extent_sim": sim_tok[13:16].round(4).tolist(),
                             "tcp_cm": round(100 * float(np.linalg.norm(rs_pro[0:3] - sim_pro[0:3])), 2),
                             "proprio_rs": rs_pro.round(3).tolist(), "proprio_sim": sim_pro.round(3).tolist(),
                             "first_chunk_rs": chunk(adapter._start_obs)[:3].round(3).tolist(),
                             "first_chunk_sim": chunk(sim_obs)[:3].round(3).tolist()},
                "robosuite": {"success": rs_success, "chunks": len(chunks), "min_tcp_cube_cm": round(100 * rs_min, 1)},
                "replay_gap_cm": gap,
                "tcp_robosuite": np.round(rs_tcp, 4).tolist(), "tcp_replay_here": np.round(sim_tcp, 4).tolist(),
                "mirror": {"success": bool(minfo["success"]), "chunks": k},
                "mirror_from_home": {"success": bool(hinfo["success"])},
            })
            r = rows[-1]
            print(f"seed {seed}: robosuite {rs_success} (closest {r['robosuite']['min_tcp_cube_cm']} cm), mirror "
                  f"{r['mirror']['success']}, from home {r['mirror_from_home']['success']}; replay gap cm {gap[:6]}...; obs: obj {r['obs_diff']['obj_pos_cm']} cm, "
                  f"tcp {r['obs_diff']['tcp_cm']} cm", flush=True)
    finally:
        adapter.close()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    Path(args.out).write_text(json.dumps({"commit": commit, "checkpoint": args.checkpoint,
                                          "control_freq": adapter.info["control_freq"], "no_rotation": args.no_rotation,
                                          "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
