"""Rollout v1 (PROTOCOL.md): paired B − A in-distribution (decision) and OOD (reported) per seed and pooled, with
targeting precision, critic consistency, the execution share of diagnoses, rollouts per round and cell minutes.
Arm A is buffer v1's arm B.

    .venv/bin/python experiments/rollout_v1/analyze.py
"""

import importlib.util
import json
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
ARMS = {"A": HERE.parent / "buffer_v1/b", "B": HERE / "b"}
SEEDS = (6, 7, 8, 3, 4, 5)
ENGINE = ("targeting_precision", "critic_consistency", "targeted_success", "control_success")

spec = importlib.util.spec_from_file_location("buffer_v1", HERE.parent / "buffer_v1/analyze.py")
buffer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(buffer)
novel_dr = buffer.novel_dr


def run_figures(arm: Path, seed: int) -> dict:
    path = arm / "runs" / f"coda-s{seed}" / "state.json"
    if not path.exists():
        return {}
    steps = json.loads(path.read_text())["steps"]
    rounds = [r for r in range(10) if f"r{r}.rollouts" in steps]
    diagnoses = [d for r in rounds for d in steps.get(f"r{r}.diagnose", {}).get("result", [])]
    return {"rollouts per round": [len(steps[f"r{r}.rollouts"]["result"]) for r in rounds],
            "execution share": round(sum(d["factor"] == "execution" for d in diagnoses) / len(diagnoses), 3)
            if diagnoses else None}


def compare(arms: dict, seeds: tuple, here: Path, same_machine=None) -> None:
    """Paired B − A per seed and pooled (buffer v1's `report`), with the data engine's figures of both arms; keep v1
    compares the same way. `same_machine(seed)` → None when the seed passes its check, else why it is left out."""
    out: dict = {}
    for seed in seeds:
        cells = {k: novel_dr.cell(arm / "cells" / f"coda-s{seed}.json") for k, arm in arms.items()}
        if None in cells.values():
            continue
        if same_machine and (why := same_machine(seed)):
            print(f"seed {seed} left out: {why}")
            continue
        a, b = cells["A"], cells["B"]
        out[f"seed {seed}"] = {
            "B - A in-distribution (in, seed)": paired_ood(a["eval_after"], b["eval_after"], suites=("in", "seed")),
            "B - A mean OOD": paired_ood(a["eval_after"], b["eval_after"]),
            **{f"{k}: engine": {m: c["metrics"].get(m) for m in ENGINE} | run_figures(arms[k], seed)
               | {"cell minutes": round(c["metrics"]["cell_wall_seconds"] / 60, 1)} for k, c in cells.items()}}
    buffer.report(out, here, partial=len(out) < len(seeds))


def main() -> None:
    compare(ARMS, SEEDS, HERE)


if __name__ == "__main__":
    main()
