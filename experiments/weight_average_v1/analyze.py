"""Weight average v1: the tables of PROTOCOL.md from evals/*.json → analysis.json (printed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAMILIES = ("pick_place", "stack", "articulated", "prep")


def load(name: str, what: str) -> dict | None:
    p = HERE / "evals" / f"{name}-{what}.json"
    return json.loads(p.read_text()) if p.exists() else None


def robosuite(name: str) -> dict | None:
    r = load(name, "robosuite")
    if r is None:
        return None
    rates = {s["task"]: s["success_rate"] for s in r["suites"]}
    return {"tasks": rates, "mean": 100 * sum(rates.values()) / len(rates)}


def in_sim(name: str) -> float | None:
    rows = [load(name, f) for f in FAMILIES]
    if any(r is None for r in rows):
        return None
    return 100 * sum(r["success_rate"] for r in rows) / len(rows)


def mean_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def main() -> None:
    names = sorted({p.name.split("-F-")[0].split("-T-")[0] for p in (HERE / "evals").glob("*-[FT]-*.json")})
    policies = {}
    for stem in names:
        f, t = robosuite(f"{stem}-F"), robosuite(f"{stem}-T")
        if f is None or t is None:
            continue
        row = {"F": f, "T": t, "d": t["mean"] - f["mean"]}
        mf, mt = in_sim(f"{stem}-F"), in_sim(f"{stem}-T")
        if mf is not None and mt is not None:
            row |= {"in_sim_F": mf, "in_sim_T": mt, "e": mt - mf}
        policies[stem] = row
    primary = [p for p in policies if p.split("-")[0] in ("A", "Ar")]
    out = {"policies": policies}
    if len(primary) == 6:
        d, se = mean_se([policies[p]["d"] for p in primary])
        es = [policies[p]["e"] for p in primary if "e" in policies[p]]
        e = sum(es) / len(es) if len(es) == 6 else None
        verdict = ("adopt" if d >= 5 and d >= 2 * se and e is not None and e >= -3 else
                   "reject" if d <= 0 else "inconclusive")
        out["primary"] = {"D": d, "se": se, "mean_e": e, "verdict": verdict if e is not None or d <= 0 else "pending"}
        out["spread"] = {s: {arm: abs(policies[f"A-s{s}"][arm]["mean"] - policies[f"Ar-s{s}"][arm]["mean"])
                             for arm in ("F", "T")} for s in (9, 10, 11)}
        soups = {}
        for s in (9, 10, 11):
            r = robosuite(f"soup-s{s}-S")
            if r is not None:
                base = (policies[f"A-s{s}"]["F"]["mean"] + policies[f"Ar-s{s}"]["F"]["mean"]) / 2
                soups[s] = {"S": r, "mean_F": base, "S_minus_mean_F": r["mean"] - base}
        out["soups"] = soups
    rest = [p for p in policies if p not in primary]
    if rest:
        d, se = mean_se([policies[p]["d"] for p in policies])
        out["all_policies"] = {"n": len(policies), "D": d, "se": se}
    (HERE / "analysis.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "policies"}, indent=1))
    for p, row in policies.items():
        print(p, {k: round(v, 1) if isinstance(v, float) else v["tasks"] for k, v in row.items()})


if __name__ == "__main__":
    main()
