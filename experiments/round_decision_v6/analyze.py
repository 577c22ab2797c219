"""Round decision v6: the protocol's reads from the two runs (and v4's exp-weighted critic arms when v6's
`dt_failed_mix` replicates equal v4's). Run from the repository root: `python experiments/round_decision_v6/analyze.py`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
V4 = HERE.parent / "round_decision_v4"
FAMILIES = ("pick_place", "stack")
V4_ARMS = {"dt_critic_mix": "dt_filtered_mix", "dt_shaped_mix": "dt_shaped_filtered_mix"}
"""v4's exp-weighted arm -> the v6 arm it is read against (filter vs exp)"""


def scene_means(seed: dict, arm: str) -> np.ndarray:
    """Per held-out scene: the mean success over the arm's replicates."""
    return np.mean([r["success"] for r in seed["arms"][arm]["replicates"]], axis=0)


def load(here: Path, fam: str) -> tuple[list[dict], dict[str, list[np.ndarray]], list[np.ndarray]] | None:
    """A run's raw seeds for `fam` in folder `here`, each arm's per-scene replicate means per seed, and the base's
    per-scene outcomes per seed; None when the family has not run."""
    path = here / f"{fam}.json"
    if not path.exists():
        return None
    runs = json.loads(path.read_text())["per_seed"]
    arms = {a: [scene_means(s, a) for s in runs] for a in runs[0]["arms"]}
    return runs, arms, [np.asarray(s["base"], dtype=float) for s in runs]


def families(here: Path):
    """(family, runs, arms, base) of `load` for each family that has run in folder `here`."""
    for fam in FAMILIES:
        loaded = load(here, fam)
        if loaded is not None:
            yield (fam, *loaded)


def same_replicates(runs: list[dict], earlier: Path, fam: str, arm: str = "dt_failed_mix") -> bool:
    """Whether every replicate of `arm` in `runs` equals the earlier run's (folder `earlier`), scene by scene."""
    before = {s["seed"]: s for s in json.loads((earlier / f"{fam}.json").read_text())["per_seed"]}
    return all([r["success"] for r in s["arms"][arm]["replicates"]]
               == [r["success"] for r in before[s["seed"]]["arms"][arm]["replicates"]] for s in runs)


def success(means: list[np.ndarray], base: list[np.ndarray]) -> dict:
    """An arm's success over seeds and its paired difference to the base."""
    return {"success": round(100 * float(np.mean(np.concatenate(means))), 1), "vs_base": paired(means, base)}


def paired(a: list[np.ndarray], b: list[np.ndarray]) -> dict:
    d = np.concatenate([x - y for x, y in zip(a, b, strict=True)])
    return {"points": round(100 * d.mean(), 1), "se": round(100 * d.std(ddof=1) / math.sqrt(len(d)), 1), "n": len(d)}


def main() -> dict:
    out = {}
    for fam in FAMILIES:
        path = HERE / f"{fam}.json"
        if not path.exists():
            continue
        v6 = json.loads(path.read_text())["per_seed"]
        v4 = {s["seed"]: s for s in json.loads((V4 / f"{fam}.json").read_text())["per_seed"]}
        same = all(s["base"] == v4[s["seed"]]["base"] and
                   [r["success"] for r in s["arms"]["dt_failed_mix"]["replicates"]]
                   == [r["success"] for r in v4[s["seed"]]["arms"]["dt_failed_mix"]["replicates"]] for s in v6)
        arms = {a: [scene_means(s, a) for s in v6] for a in v6[0]["arms"]}
        if same:
            arms.update({f"v4:{a}": [scene_means(v4[s["seed"]], a) for s in v6] for a in V4_ARMS})
        base = [np.asarray(s["base"], dtype=float) for s in v6]
        fam_out = {"reproduces_v4": same, "base": round(100 * float(np.mean(np.concatenate(base))), 1), "arms": {}}
        for a, means in arms.items():
            fam_out["arms"][a] = {"success": round(100 * float(np.mean(np.concatenate(means))), 1),
                                  "vs_base": paired(means, base)}
        reads = [("dt_shaped_filtered_mix", "dt_filtered_mix"), ("dt_shaped_filtered_mix", "dt_failed_mix"),
                 ("dt_filtered_mix", "dt_failed_mix")]
        if same:
            reads += [(new, f"v4:{old}") for old, new in V4_ARMS.items()]
        fam_out["paired"] = {f"{x} - {y}": paired(arms[x], arms[y]) for x, y in reads if x in arms and y in arms}
        fam_out["positive_share"] = {a: [r.get("positive_share") for s in v6 for r in s["arms"][a]["replicates"]]
                                     for a in ("dt_filtered_mix", "dt_shaped_filtered_mix") if a in arms}
        summary = HERE / f"{fam}.summary.json"
        if summary.exists():
            fam_out["updates_to_base_plus_5"] = {a: v["updates_to_base_plus_5"]
                                                 for a, v in json.loads(summary.read_text())["arms"].items()}
            fam_out["curve"] = {a: v.get("curve") for a, v in json.loads(summary.read_text())["arms"].items()}
        out[fam] = fam_out
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
