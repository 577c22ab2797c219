"""Metrics of a finished cell: OOD success, coverage entropy, targeting precision, the learning curve; means and
standard errors over seeds; updates to a success threshold."""

from __future__ import annotations

import math
import time
from collections import defaultdict

from agent.experiment.common import cell_name, code_commit
from sim.constants import OOD_SUITES


def mean_ood(evals: list[dict], family: str | None = None) -> float:
    xs = [e["success_rate"] for e in evals if e["suite"] in OOD_SUITES and (family is None or e["family"] == family)]
    return sum(xs) / len(xs) if xs else float("nan")


def paired_ood(before: list[dict], after: list[dict], suites=OOD_SUITES) -> dict | None:
    """Mean OOD success after − before, paired scene by scene (evaluations of a suite use its first n scenes, so
    the shorter of two evaluations is the common prefix), ± the standard error of the paired difference: each OOD
    suite weighs equally, as in `mean_ood`. `suites` picks others (e.g. `("in", "seed")`). None when the
    evaluations carry no per-scene outcomes."""
    prior = {(e["family"], e["suite"]): e.get("outcomes") for e in before}
    diffs, ses = [], []
    for e in after:
        a, b = e.get("outcomes"), prior.get((e["family"], e["suite"]))
        if e["suite"] not in suites or not a or not b:
            continue
        k = min(len(a), len(b))
        d = [int(x) - int(y) for x, y in zip(a[:k], b[:k], strict=True)]
        mean = sum(d) / k
        var = sum((x - mean) ** 2 for x in d) / (k - 1) if k > 1 else 0.0
        diffs.append(mean)
        ses.append(var / k)
    if not diffs:
        return None
    m = len(diffs)
    return {"points": 100 * sum(diffs) / m, "se": 100 * math.sqrt(sum(ses)) / m, "suites": m}


def _mean_rate(rows: list[dict]) -> float:
    return sum(e["success_rate"] for e in rows) / len(rows) if rows else float("nan")


def paired_outcomes(a: dict[str, list], b: dict[str, list]) -> dict | None:
    """Success of a − b over the same episodes (per task the common prefix of their outcomes; tasks weigh
    equally), ± the s.e. of the paired difference; None without common outcomes."""
    diffs, ses = [], []
    for task, x in a.items():
        y = b.get(task)
        if not x or not y:
            continue
        k = min(len(x), len(y))
        d = [int(u) - int(v) for u, v in zip(x[:k], y[:k], strict=True)]
        mean = sum(d) / k
        diffs.append(mean)
        ses.append((sum((v - mean) ** 2 for v in d) / (k - 1) if k > 1 else 0.0) / k)
    if not diffs:
        return None
    m = len(diffs)
    return {"points": 100 * sum(diffs) / m, "se": 100 * math.sqrt(sum(ses)) / m, "tasks": m}


def base_mark(evals: list[dict], sha: str | None = None) -> dict:
    """What identifies the base policy a cell started from: its checkpoint's digest where known, and its evaluation
    before the rounds (`mean_ood_before`, `in_dist_before`, as a cell records them)."""
    return {"base_sha": sha, "mean_ood_before": mean_ood(evals), "in_dist_before": suite_mean(evals, "in")}


def same_base(a: dict, b: dict) -> bool:
    """Whether two cells (or `base_mark`s) started from the same base policy: by checkpoint digest where both have
    one, else by their base evaluations (a base retrained on another machine differs: torch's CPU kernels are not
    bit-identical across processors, and training amplifies the difference)."""
    if a.get("base_sha") and b.get("base_sha"):
        return a["base_sha"] == b["base_sha"]
    return (a.get("mean_ood_before"), a.get("in_dist_before")) == (b.get("mean_ood_before"), b.get("in_dist_before"))


def suite_mean(evals: list[dict], suite: str) -> float:
    xs = [e["success_rate"] for e in evals if e["suite"] == suite]
    return sum(xs) / len(xs) if xs else float("nan")


def coverage_entropy(scenes: list[dict]) -> float:
    """Shannon entropy (bits) of accepted environments over (family, varied factor, operator)."""
    counts: dict[tuple, int] = defaultdict(int)
    for s in scenes:
        if s["verified"]:
            counts[(s["family"], s.get("factor") or s["batch"], s.get("operator") or "-")] += 1
    n = sum(counts.values())
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def targeting_precision(rollouts: list[dict], diagnoses: list[dict]) -> float | None:
    """Of the rollouts in targeted environments that were judged (succeeded, or failed and diagnosed), the share
    whose failure the critic put in the mode the environment targeted."""
    diag = {d["rollout_id"]: d for d in diagnoses}
    judged = hits = 0
    for x in rollouts:
        if x["batch"] != "targeted":
            continue
        if x["success"]:
            judged += 1
        elif x["rollout_id"] in diag:
            judged += 1
            hits += diag[x["rollout_id"]]["mode_id"] == x["mode_id"]
    return hits / judged if judged else None


def critic_consistency(diagnoses: list[dict]) -> float | None:
    """Of the pairs of failures diagnosed in the same scene (the same round's rollouts), the share the critic put in
    the same mode: how reproducible a mode is, hence the most targeting precision can reach with this critic."""
    by_scene: dict[tuple, list[str]] = defaultdict(list)
    for d in diagnoses:
        by_scene[(d.get("round"), d["scene_id"])].append(d["mode_id"])
    pairs = same = 0
    for modes in by_scene.values():
        for i in range(len(modes)):
            for j in range(i + 1, len(modes)):
                pairs += 1
                same += modes[i] == modes[j]
    return same / pairs if pairs else None


def batch_success(rollouts: list[dict], batch: str) -> float | None:
    """Success rate of a batch's rollouts (targeted vs control: the premise of validation is targeted < control)."""
    xs = [x["success"] for x in rollouts if x["batch"] == batch]
    return sum(xs) / len(xs) if xs else None


def summarize(state: dict, *, method: str, seed: int, backbone: str, base: dict | None = None,
              shared: dict | None = None) -> dict:
    from agent.report import run_metrics

    steps = state["steps"]
    rounds = sorted(int(k[1:].split(".")[0]) for k in steps if k.startswith("r") and k.endswith(".eval"))
    curve = [{"round": 0, "policy_updates": 0, "critic_updates": 0, "eval": steps["eval.before"]["result"]}]
    pu = cu = 0
    for r in rounds:
        t = steps.get(f"r{r}.train", {}).get("result", {})
        if "skipped" not in t:
            pu += t.get("policy_updates", state["preset"]["policy_updates"])
            cu += t.get("critic_updates", state["preset"]["critic_updates"])
        curve.append({"round": r + 1, "policy_updates": pu, "critic_updates": cu, "eval": steps[f"r{r}.eval"]["result"]})
    scenes = [s for k, v in steps.items() if k.endswith(".generate") for s in v["result"]]
    rollouts = [x for k, v in steps.items() if k.endswith(".rollouts") for x in v["result"]]
    diagnoses = [{**d, "round": k.split(".")[0]} for k, v in steps.items() if k.endswith(".diagnose")
                 for d in v["result"]]
    batches: dict[str, dict[str, int]] = {}
    for r in rounds:
        b: dict[str, int] = defaultdict(int)
        for s in steps[f"r{r}.generate"]["result"]:
            if s["verified"]:
                b[s["batch"]] += 1
        batches[f"r{r}"] = dict(b)
    after, before = steps["eval.after"]["result"], steps["eval.before"]["result"]
    trains = [steps[f"r{r}.train"]["result"] for r in rounds if f"r{r}.train" in steps]
    metrics = {**run_metrics(state), "coverage_entropy_bits": coverage_entropy(scenes),
               "targeting_precision": targeting_precision(rollouts, diagnoses),
               "critic_consistency": critic_consistency(diagnoses),
               "targeted_success": batch_success(rollouts, "targeted"),
               "control_success": batch_success(rollouts, "control"),
               "shaped_rollouts": sum(t.get("shaped_rollouts", 0) for t in trains),
               "reused_potentials": sum(t.get("reused_potentials", 0) for t in trains),
               "accepted_per_round": [sum(batches[f"r{r}"].values()) for r in rounds],
               "cell_wall_seconds": state.get("wall_seconds"),
               "base_seconds": (base or {}).get("seconds"),
               "shared_round0": bool(steps.get("r0.train", {}).get("result", {}).get("shared_round0")),
               "shared_round0_seconds": (shared or {}).get("seconds")}
    external = {}
    if "external.after" in steps:  # external targets (Preset.external): the benchmark tasks before and after
        ext_before, ext_after = steps["external.before"]["result"], steps["external.after"]["result"]
        external = {"external": {e["suite"]: e["success_rate"] for e in ext_after},
                    "external_before": {e["suite"]: e["success_rate"] for e in ext_before},
                    "external_mean": _mean_rate(ext_after), "external_mean_before": _mean_rate(ext_before),
                    "external_outcomes": {e["suite"]: e.get("outcomes") for e in ext_after},
                    "external_phases": {e["suite"]: e["phases"] for e in ext_after if e.get("phases")},
                    "external_phases_before": {e["suite"]: e["phases"] for e in ext_before if e.get("phases")}}
    return {
        **external,
        "cell": cell_name(method, seed, backbone), "method": method, "seed": seed, "backbone": backbone,
        "preset": state["preset"], "commit": code_commit(), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "ood": {f: mean_ood(after, f) for f in state["preset"]["families"]},
        "ood_before": {f: mean_ood(before, f) for f in state["preset"]["families"]},
        "in_dist": suite_mean(after, "in"), "in_dist_before": suite_mean(before, "in"),
        "mean_ood": mean_ood(after), "mean_ood_before": mean_ood(before), "paired_ood": paired_ood(before, after),
        "base_sha": (base or {}).get("sha"),
        "curve": [{**c, "mean_ood": mean_ood(c["eval"]), "in_dist": suite_mean(c["eval"], "in")} for c in curve],
        "batches": batches, "metrics": metrics, "eval_after": after,
    }


def mean_se(xs: list[float]) -> tuple[float | None, float | None, int]:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None, 0
    m = sum(xs) / len(xs)
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else None
    return m, se, len(xs)


def updates_to_threshold(cell: dict, gain: float) -> tuple[float, int | None]:
    """(threshold, policy updates at the first evaluation whose mean OOD success reaches it; None if never)."""
    thr = cell["mean_ood_before"] + gain
    for c in cell["curve"]:
        if c["mean_ood"] >= thr - 1e-9 and c["round"] > 0:
            return thr, c["policy_updates"]
    return thr, None

