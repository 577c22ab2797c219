"""Refine v1's decision (PROTOCOL.md): paired no_refine − coda per seed, in distribution (`in` suite) and on mean
OOD, from the cells' per-episode outcomes; pooled over the seeds run, ± the pooled episodes' s.e. Writes
analysis.json beside this file."""

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
OOD = ("instances", "layouts", "tasks", "categories")


def outcomes(cell: dict, suites) -> dict:
    return {(e["family"], e["suite"]): [int(ch) for ch in e["outcomes"]] for e in cell["eval_after"]
            if e["suite"] in suites}


def paired(a: dict, b: dict) -> tuple[float, float, int]:
    """Mean over (family, suite) units of b − a, and its s.e. from per-scene differences (units weighted equally)."""
    units = sorted(set(a) & set(b))
    means, variances = [], []
    for u in units:
        d = [y - x for x, y in zip(a[u], b[u], strict=True)]
        m = sum(d) / len(d)
        means.append(m)
        variances.append(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
    k = len(units)
    return 100 * sum(means) / k, 100 * math.sqrt(sum(variances)) / k, sum(len(a[u]) for u in units)


def main() -> None:
    rows, pooled = {}, {"in": [], "ood": []}
    for seed in (12, 13, 14):
        paths = [HERE / "cells" / f"{m}-s{seed}.json" for m in ("coda", "no_refine")]
        if not all(p.exists() for p in paths):
            continue
        coda, ablation = (json.loads(p.read_text()) for p in paths)
        row = {}
        for key, suites in (("in", ("in",)), ("ood", OOD)):
            d, se, n = paired(outcomes(coda, suites), outcomes(ablation, suites))
            row[key] = {"diff": round(d, 2), "se": round(se, 2), "episodes": n}
            pooled[key].append((d, se))
        row["commits"] = [coda["commit"], ablation["commit"]]
        rows[seed] = row
    out = {"seeds": rows}
    for key, vals in pooled.items():
        if vals:
            d = sum(v for v, _ in vals) / len(vals)
            se = math.sqrt(sum(s * s for _, s in vals)) / len(vals)
            out[f"pooled_{key}"] = {"diff": round(d, 2), "se": round(se, 2), "seeds": len(vals)}
    if len(rows) == 3:
        p = out["pooled_in"]
        out["decision"] = "replicated" if p["diff"] > 0 and p["diff"] > 2 * p["se"] else "not replicated"
    else:
        out["decision"] = "partial: decides nothing"
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
