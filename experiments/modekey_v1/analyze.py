"""Mode key v1 (PROTOCOL.md): paired C − A (arm A = novel DR v1's arm A), and with --recluster the offline
re-clustering of stored diagnoses behind the protocol's question.

    .venv/bin/python experiments/modekey_v1/analyze.py
    .venv/bin/python experiments/modekey_v1/analyze.py --recluster experiments/grid_v2b/runs/coda-s6 ...
"""

import importlib.util
import itertools
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
NOVEL_DR = HERE.parent / "novel_dr_v1"


def consistency(diagnoses, mode_of: dict) -> float | None:
    """Share of same-(round, scene) diagnosis pairs in one mode (`agent.experiment.metrics.critic_consistency`)."""
    by = defaultdict(list)
    for d in diagnoses:
        by[(d.round, d.scene_id)].append(mode_of[d.id])
    pairs = [a == b for modes in by.values() for a, b in itertools.combinations(modes, 2)]
    return sum(pairs) / len(pairs) if pairs else None


def recluster(diagnoses, key, threshold: float) -> tuple[dict, int]:
    """Online clustering as memory_store.modes does it, with `key` choosing the candidate modes."""
    modes, out = [], {}
    for d in diagnoses:
        v = np.asarray(d.embedding, dtype=np.float32)
        v = v / np.linalg.norm(v)
        scored = [(float(v @ m["c"]), m) for m in modes if m["key"] == key(d)]
        sim, best = max(scored, key=lambda x: x[0], default=(-2.0, None))
        if best is not None and sim >= threshold:
            c = best["c"] * best["n"] + v
            best["c"], best["n"] = c / np.linalg.norm(c), best["n"] + 1
            out[d.id] = best["id"]
        else:
            modes.append({"key": key(d), "c": v, "n": 1, "id": len(modes)})
            out[d.id] = len(modes) - 1
    return out, len(modes)


def recluster_runs(runs: list[str]) -> None:
    from memory_store.embed import HashingEmbedder
    from memory_store.store import MemoryStore

    for run in runs:
        store = MemoryStore.open(f"{run}/memory", embedder=HashingEmbedder(), create=False)
        ds = sorted(store.records("diagnoses"), key=lambda d: (d.round or 0, str(d.created_at)))
        stored = {d.id: d.mode_id for d in ds}
        print(f"{run}: {len(ds)} diagnoses, stored modes {len(set(stored.values()))}, "
              f"consistency {consistency(ds, stored):.3f}")
        for name, key in (("factor+phase", lambda d: (d.factor, d.phase)), ("factor", lambda d: d.factor)):
            mode_of, n = recluster(ds, key, 0.6)
            print(f"  key {name:12s} threshold 0.6: {n} modes, consistency {consistency(ds, mode_of):.3f}")


def main() -> None:
    if sys.argv[1:2] == ["--recluster"]:
        recluster_runs(sys.argv[2:])
        return
    spec = importlib.util.spec_from_file_location("novel_dr_analyze", NOVEL_DR / "analyze.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(here=HERE, arm_a=NOVEL_DR / "a", arm_b=HERE / "c", seeds=(6, 7))


if __name__ == "__main__":
    main()
