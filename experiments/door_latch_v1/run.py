"""Door latch v1 (PROTOCOL.md, diagnostic): two policies on robosuite Door with and without its latch.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/door_latch_v1/run.py
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from policy.checkpoint import load_checkpoint
from policy.external.evaluate import episode_seeds, run_task
from policy.rollout import chunk_fn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
POLICIES = {"rate-s9": ("/tmp/gmap-rate-s9.pt", "86e9a73f09873bab"),
            "rate-s10": ("/tmp/gmap-rate-s10.pt", "610056cb0439b16c")}
GROUP, N = 0, 40
ARMS = {"latched": {}, "unlatched": {"env_kwargs": {"use_latch": False}}}


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out = {"commit": commit, "group": GROUP, "n": N, "arms": ARMS, "policies": {}}
    seeds = episode_seeds(N, 1, GROUP)
    for name, (path, sha) in POLICIES.items():
        got = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        assert got.startswith(sha), f"{path}: sha256 {got[:16]}, the protocol names {sha}"
        act = chunk_fn(load_checkpoint(path).policy, mode="mean")
        out["policies"][name] = {"path": path, "sha256": got}
        for arm, kwargs in ARMS.items():
            episodes = run_task(act, "robosuite", "Door", seeds, adapter_kwargs=kwargs)[0]
            out["policies"][name][arm] = {
                "success": [int(e.success) for e in episodes],
                "phase": [(e.phase or {}).get("phase") for e in episodes],
                "max_handle_moved": [(e.phase or {}).get("max_obj_displacement") for e in episodes]}
            r = out["policies"][name][arm]
            print(f"[door_latch_v1 {time.strftime('%H:%M:%S')}] {name} / {arm}: success {sum(r['success'])}/{N}, "
                  f"phases {dict((p, r['phase'].count(p)) for p in set(r['phase']))}", file=sys.stderr, flush=True)
            (HERE / "raw.json").write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
