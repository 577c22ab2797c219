"""Buffer v1 (PROTOCOL.md): the same-machine check (arm B's round-2 rollouts against arm A's, which start from the
same checkpoint), then paired B − A in-distribution (decision) and OOD (reported) per seed and pooled, with each
arm's scene demos per round and cell minutes.

    .venv/bin/python experiments/buffer_v1/analyze.py
"""

import importlib.util
import json
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
EXP = HERE.parent
ARM_A = {3: EXP / "recreate_v1/a", 4: EXP / "recreate_v1/a", 5: HERE / "a", 6: EXP / "novel_dr_v1/a",
         7: EXP / "novel_dr_v1/a", 8: EXP / "grid_v2b_s8"}
ARM_B = HERE / "b"
SEEDS = (6, 7, 8, 3, 4, 5)

spec = importlib.util.spec_from_file_location("novel_dr_v1", EXP / "novel_dr_v1/analyze.py")
novel_dr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(novel_dr)


def state(arm: Path, seed: int) -> dict | None:
    path = arm / "runs" / f"coda-s{seed}" / "state.json"
    return json.loads(path.read_text()) if path.exists() else None


def same_machine(a: dict | None, b: dict | None) -> bool | None:
    """Round 2's rollouts (before its update, from the shared round-1 checkpoint and the same round-1 data) equal."""
    if not a or not b or "r1.rollouts" not in a["steps"] or "r1.rollouts" not in b["steps"]:
        return None
    key = lambda rows: [(x["scene_id"], x["success"], x["steps"]) for x in rows]  # noqa: E731
    return key(a["steps"]["r1.rollouts"]["result"]) == key(b["steps"]["r1.rollouts"]["result"])


def scene_demos(s: dict | None) -> list:
    return [s["steps"][f"r{r}.train"]["result"].get("scene_demos") for r in range(3)] if s else []


def main() -> None:
    out: dict = {}
    for seed in SEEDS:
        a, b = (novel_dr.cell(arm / "cells" / f"coda-s{seed}.json") for arm in (ARM_A[seed], ARM_B))
        if a is None or b is None:
            continue
        sa, sb = state(ARM_A[seed], seed), state(ARM_B, seed)
        out[f"seed {seed}"] = {
            "same machine (round-2 rollouts equal)": same_machine(sa, sb),
            "B - A in-distribution (in, seed)": paired_ood(a["eval_after"], b["eval_after"], suites=("in", "seed")),
            "B - A mean OOD": paired_ood(a["eval_after"], b["eval_after"]),
            "scene demos per round": {"A": scene_demos(sa), "B": scene_demos(sb)},
            "cell minutes": {"A": round(a["metrics"]["cell_wall_seconds"] / 60, 1),
                             "B": round(b["metrics"]["cell_wall_seconds"] / 60, 1)}}
    report(out, HERE)


def report(out: dict, here: Path, **pooled_extra) -> None:
    """Pool the per-seed "B - A" rows (± the s.e. over seeds), print them and write here/analysis.json; rollout
    v1 reports the same way."""
    rows = list(out.values())
    if rows:
        keys = [k for k in rows[0] if k.startswith("B - A")]
        out["pooled"] = {k: novel_dr.pooled([r[k] for r in rows]) for k in keys} | pooled_extra
    for group, row in out.items():
        print(group)
        for k, v in row.items():
            if isinstance(v, dict) and "points" in v:
                over = f", ± {v['se_over_seeds']:.1f} over seeds" if v.get("se_over_seeds") is not None else ""
                print(f"  {k}: {v['points']:+.1f} ± {v['se']:.1f}{over}" + (f" ({v['seeds']} seeds)" if "seeds" in v else ""))
            else:
                print(f"  {k}: {v}")
    (here / "analysis.json").write_text(json.dumps(out, indent=1))

if __name__ == "__main__":
    main()
