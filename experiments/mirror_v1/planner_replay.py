"""The scripted planner's demonstration of each mirrored Lift episode (mirror v1), replayed open-loop on robosuite:
do this simulator's demonstrations run on robosuite's arm? `--max-drot R` caps the planner's turn per step (a
diagnostic setting of `sim.motion.MAX_DROT`; the project's value is 0.25 rad).

    .venv/bin/python experiments/mirror_v1/planner_replay.py --n 12 [--max-drot 0.08] --out experiments/mirror_v1/planner_replay.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mirror import mirror_spec  # noqa: E402

import sim.motion  # noqa: E402
from policy.external.evaluate import episode_seeds  # noqa: E402
from policy.external.robosuite_tasks import RobosuiteAdapter  # noqa: E402
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO  # noqa: E402
from sim.env import CodaEnv  # noqa: E402
from sim.planner import run_planner  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--max-drot", type=float, default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.max_drot is not None:
        sim.motion.MAX_DROT = args.max_drot
    adapter = RobosuiteAdapter("Lift")
    rows = []
    try:
        for seed in episode_seeds(args.n, 1, 0):
            obs = adapter.reset(seed=seed)
            spec = mirror_spec(adapter.start_objects(), adapter.start_robot(),
                               list(np.asarray(obs[OBS_OBJECTS])[0][3:7]), seed)
            demo = run_planner(CodaEnv(spec), seed=0)
            actions = np.asarray(demo.actions)
            turn = float(np.abs(actions[:, 3:6]).max()) if len(actions) else 0.0
            success, k, tcp = False, 0, []
            while k < len(actions):
                o, _, term, trunc, info = adapter.step_chunk(actions[k : k + CHUNK])
                tcp.append(np.asarray(o[OBS_PROPRIO])[0:3].tolist())
                k += CHUNK
                if term or trunc:
                    success = bool(info["success"])
                    break
            else:
                success = adapter.benchmark_success()
            rows.append({"seed": seed, "planner_success_here": bool(demo.success), "planner_steps": len(actions),
                         "max_turn_per_step": round(turn, 3), "robosuite_success": success})
            print(rows[-1], flush=True)
    finally:
        adapter.close()
    out = {"max_drot": args.max_drot if args.max_drot is not None else 0.25, "rows": rows,
           "here": sum(r["planner_success_here"] for r in rows), "robosuite": sum(r["robosuite_success"] for r in rows)}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(out["here"], out["robosuite"])


if __name__ == "__main__":
    main()
