"""Pure rotations in robosuite and in this simulator from the same start (mirror v1): how far the TCP moves and
how far it turns under a chunk of rotation-only actions.

    .venv/bin/python experiments/mirror_v1/rotation_probe.py > experiments/mirror_v1/rotation_probe.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mirror import mirror_spec  # noqa: E402

from policy.external.robosuite_tasks import RobosuiteAdapter  # noqa: E402
from sim.constants import CHUNK, OBS_OBJECTS, OBS_PROPRIO  # noqa: E402
from sim.env import CodaEnv  # noqa: E402


def angle(q0, q1) -> float:
    d = abs(float(np.dot(q0, q1)) / (np.linalg.norm(q0) * np.linalg.norm(q1)))
    return float(2 * np.arccos(min(1.0, d)))


def main() -> None:
    adapter = RobosuiteAdapter("Lift")
    rows = []
    try:
        for axis, rate in (("yaw", (0, 0, -0.25)), ("yaw_slow", (0, 0, -0.08)), ("roll", (-0.15, 0, 0)),
                           ("none", (0, 0, 0))):
            chunk = np.array([[0, 0, 0, *rate, -1.0]] * CHUNK)
            obs = adapter.reset(seed=0)
            p0 = np.asarray(obs[OBS_PROPRIO])
            env = CodaEnv(mirror_spec(adapter.start_objects(), adapter.start_robot(),
                                      list(np.asarray(obs[OBS_OBJECTS])[0][3:7]), 0))
            s0 = np.asarray(env.reset()[OBS_PROPRIO])
            rs = np.asarray(adapter.step_chunk(chunk)[0][OBS_PROPRIO])
            here = np.asarray(env.step_chunk(chunk)[0][OBS_PROPRIO])
            rows.append({"rotation": axis, "per_step_rad": list(rate),
                         "robosuite": {"tcp_moved_cm": round(100 * float(np.linalg.norm(rs[:3] - p0[:3])), 2),
                                       "turned_rad": round(angle(p0[3:7], rs[3:7]), 3)},
                         "here": {"tcp_moved_cm": round(100 * float(np.linalg.norm(here[:3] - s0[:3])), 2),
                                  "turned_rad": round(angle(s0[3:7], here[3:7]), 3)}})
    finally:
        adapter.close()
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
