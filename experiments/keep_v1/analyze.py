"""Keep v1 (PROTOCOL.md): paired B − A in-distribution (decision) and OOD (reported) per seed and pooled, with the
data engine's figures (targeting precision, targeted vs control success); arm A is rollout v1's arm B. A seed
whose round-1 interventions and diagnoses differ between the arms (another machine's numbers) is left out.

    .venv/bin/python experiments/keep_v1/analyze.py
"""

import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).parent
ARMS = {"A": HERE.parent / "rollout_v1/b", "B": HERE / "b"}
SEEDS = (6, 7, 8, 3, 4, 5)

spec = importlib.util.spec_from_file_location("rollout_v1", HERE.parent / "rollout_v1/analyze.py")
rollout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rollout)


def same_machine(seed: int) -> str | None:
    steps = {k: json.loads((arm / "runs" / f"coda-s{seed}" / "state.json").read_text())["steps"]
             for k, arm in ARMS.items()}
    differ = [k for k in ("r0.intervene", "r0.diagnose") if steps["A"][k]["result"] != steps["B"][k]["result"]]
    return f"round 1's {', '.join(differ)} differ from arm A's" if differ else None


if __name__ == "__main__":
    rollout.compare(ARMS, SEEDS, HERE, same_machine=same_machine)
