"""Compare the step records of two `coda run` directories (issue 18: same seed -> same results before and after a
refactor). Timing fields, the run names and the per-server statistics are dropped; everything else must match.

    python experiments/redesign_check/compare_runs.py RUN_A RUN_B
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMING = ("seconds", "wall", "time", "elapsed", "finished", "started", "mcp")


def normalize(value, names: tuple[str, str]):
    if isinstance(value, dict):
        return {k: normalize(v, names) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [normalize(v, names) for v in value]
    if isinstance(value, str):
        return value.replace(names[0], "RUN").replace(names[1], "RUN")
    return value


def main(a: str, b: str) -> int:
    sa, sb = (json.loads((Path(p) / "state.json").read_text()) for p in (a, b))
    names = (Path(a).name, Path(b).name)
    order_a, order_b = sa["order"], sb["order"]
    if order_a != order_b:
        print(f"step order differs:\n  {order_a}\n  {order_b}")
        return 1
    differ = []
    for step in order_a:
        ra, rb = (normalize(s["steps"][step]["result"], names) for s in (sa, sb))
        if ra != rb:
            differ.append(step)
            print(f"DIFFERS {step}:\n  {json.dumps(ra)[:600]}\n  {json.dumps(rb)[:600]}")
    print(f"{len(order_a) - len(differ)} of {len(order_a)} steps identical" + (f"; differ: {differ}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
