"""A′ − A of replicate v1 (PROTOCOL.md): grid v2's coda cells run again, in-distribution and OOD.

    .venv/bin/python experiments/replicate_v1/analyze.py
"""

import json
from pathlib import Path

from agent.experiment.metrics import paired_ood

HERE = Path(__file__).parent


def cell(path: Path) -> list[dict]:
    return json.loads(path.read_text())["eval_after"]


def differing(a: list[dict], b: list[dict]) -> tuple[int, int]:
    """Paired episodes whose outcome differs, and all paired episodes."""
    prior = {(e["family"], e["suite"]): e["outcomes"] for e in a}
    diff = total = 0
    for e in b:
        x = prior.get((e["family"], e["suite"]))
        if x:
            k = min(len(x), len(e["outcomes"]))
            diff += sum(p != q for p, q in zip(x[:k], e["outcomes"][:k], strict=True))
            total += k
    return diff, total


def main() -> None:
    out: dict = {}
    for seed in (5, 4):
        if not (HERE / "cells" / f"coda-s{seed}.json").exists():
            continue
        a = cell(HERE.parent / "grid_v2" / "cells" / f"coda-s{seed}.json")
        a2 = cell(HERE / "cells" / f"coda-s{seed}.json")
        b5 = cell(HERE.parent / "rounds_v1" / "cells" / f"coda-s{seed}.json")
        row = {"A' - A in-distribution (in, seed)": paired_ood(a, a2, suites=("in", "seed")),
               "A' - A mean OOD": paired_ood(a, a2),
               "rounds_v1 B - A' in-distribution (same machine)": paired_ood(a2, b5, suites=("in", "seed")),
               "rounds_v1 B - A' mean OOD (same machine)": paired_ood(a2, b5)}
        print(f"seed {seed}")
        for k, v in row.items():
            print(f"  {k}: {v['points']:+.1f} ± {v['se']:.1f}")
        d, n = differing(a, a2)
        row["episodes differing A' vs A"] = {"differ": d, "paired": n}
        print(f"  episodes differing A' vs A: {d} of {n}")
        out[f"seed {seed}"] = row
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
