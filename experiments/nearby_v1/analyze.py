"""Paired B − A of nearby v1 (PROTOCOL.md): in-distribution (decision) and OOD (reported).

    .venv/bin/python experiments/nearby_v1/analyze.py
"""

import json
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent
GRID = HERE.parent / "grid_v2" / "cells"


def cell(path: Path) -> list[dict]:
    return json.loads(path.read_text())["eval_after"]


def main() -> None:
    a, b, sg = cell(GRID / "coda-s4.json"), cell(HERE / "cells" / "coda-s4.json"), cell(GRID / "success_guided-s4.json")
    out = {"B - A in-distribution (in, seed)": paired_ood(a, b, suites=("in", "seed")),
           "B - A mean OOD": paired_ood(a, b),
           "B - success_guided mean OOD": paired_ood(sg, b),
           "A - success_guided mean OOD": paired_ood(sg, a)}
    for k, v in out.items():
        print(f"{k}: {v['points']:+.1f} ± {v['se']:.1f} ({v['suites']} suites)")
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
