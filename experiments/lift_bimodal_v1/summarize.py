"""Lift bimodal v1's summary (traces.json → summary.json): per policy, the TCP's place relative to the cube after
the first chunk (8 actions), the finger opening after the second, whether the hand ever opens again after closing,
and success.

    .venv/bin/python experiments/lift_bimodal_v1/summarize.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    d = json.loads((HERE / "traces.json").read_text())
    out = {"commit": d["commit"], "policies": d["policies"]}
    for name, rows in d["rows"].items():
        first = [r["path"][1] for r in rows]
        dz = [100 * (s["tcp"][2] - s["cube"][2]) for s in first]
        dxy = [100 * float(np.linalg.norm(np.subtract(s["tcp"][:2], s["cube"][:2]))) for s in first]
        closed_high = [r for r in rows if not r["success"] and len(r["path"]) > 2 and r["path"][2]["open"] < 0.2]
        reopened = [r for r in closed_high if any(s["open"] > 0.5 for s in r["path"][3:])]
        out[name] = {"episodes": len(rows), "success": sum(r["success"] for r in rows),
                     "tcp_above_cube_cm_after_chunk1": {"mean": round(float(np.mean(dz)), 2),
                                                        "per_episode": [round(x, 1) for x in dz]},
                     "tcp_xy_from_cube_cm_after_chunk1": {"mean": round(float(np.mean(dxy)), 2),
                                                          "per_episode": [round(x, 1) for x in dxy]},
                     "failed_closed_by_chunk2": len(closed_high), "of_them_reopened_later": len(reopened)}
    (HERE / "summary.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("policies",)}, indent=1))


if __name__ == "__main__":
    main()
