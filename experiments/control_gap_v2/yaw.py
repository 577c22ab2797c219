"""Control gap v2, the cube's heading: the policy closed loop in each Lift episode's mirror here (replay.py's raw
file: robosuite's cube, start and gripper rate), with the cube at robosuite's heading (`raw`, anywhere in a full
turn) and turned by the quarter turn that brings its heading within ±45° (`canonical`: the same cube, a 4 cm
cube cannot tell the two apart; this project's scenes place objects within ±0.6 rad).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/control_gap_v2/yaw.py experiments/control_gap_v2/lift-s9.json \
        --out experiments/control_gap_v2/yaw-s9.json
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
from pathlib import Path

from policy.checkpoint import load_checkpoint
from policy.data import collate_obs
from policy.rollout import chunk_fn
from policy.text import get_embedder

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("control_gap_v2", ROOT / "experiments" / "control_gap_v2" / "replay.py")
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)


def heading(q) -> float:
    w, x, y, z = q
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    d = json.load(open(args.raw))
    sha = hashlib.sha256(Path(d["checkpoint"]).read_bytes()).hexdigest()[:16]
    act, emb = chunk_fn(load_checkpoint(d["checkpoint"]).policy, mode="mean"), get_embedder()

    def chunk(obs):
        return act(collate_obs([obs], emb, "cpu")).detach().cpu().numpy()[0]

    rows = []
    for r in d["rows"]:
        raw = heading(r["cube_quat"])
        canon = (raw + math.pi / 4) % (math.pi / 2) - math.pi / 4
        row = {"seed": r["seed"], "robosuite": r["robosuite"]["success"], "heading_raw": round(raw, 4),
               "heading_canonical": round(canon, 4)}
        for name, h in (("raw", raw), ("canonical", canon)):
            st = r["start"]
            spec = R.M.mirror_spec([r["cube"]], {k: st[k] for k in ("pos", "quat", "opening")},
                                   [math.cos(h / 2), 0.0, 0.0, math.sin(h / 2)], r["seed"])
            spec = spec.with_start({**spec.start.model_dump(), "gripper_rate": st["gripper_rate"]})
            row[name] = R.closed_loop(spec, chunk, False)
        rows.append(row)
        print(row, flush=True)
    out = {"raw_file": args.raw, "checkpoint": d["checkpoint"], "sha256_16": sha, "rows": rows,
           "success": {k: sum(r[k] for r in rows) for k in ("raw", "canonical")},
           "beyond_0.6_rad": sum(abs(r["heading_raw"]) > 0.6 for r in rows)}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(out["success"], "headings beyond ±0.6 rad:", out["beyond_0.6_rad"], "of", len(rows))


if __name__ == "__main__":
    main()
