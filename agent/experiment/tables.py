"""The experiment's tables (markdown and JSON) and plots, rebuilt from the finished cells."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from agent.experiment.common import (
    DEFAULT_BACKBONE,
    THRESHOLD_GAIN,
    TRANSFER_BACKBONE,
    cell_name,
    load_cells,
    plan_cells,
    say,
    write_json,
)
from agent.experiment.metrics import mean_se, paired_ood, same_base, updates_to_threshold
from agent.methods import MAIN
from sim.constants import FAMILIES, SUITES


def _fmt(m: float | None, se: float | None = None, scale: float = 100.0, digits: int = 1) -> str:
    if m is None:
        return "pending"
    s = f"{scale * m:.{digits}f}"
    return s + (f" ± {scale * se:.{digits}f}" if se is not None else "")


def _md(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def build_tables(cells: list[dict], threshold_gain: float = THRESHOLD_GAIN, methods: list[str] | None = None,
                 seeds: list[int] | None = None) -> dict:
    main = [c for c in cells if c["backbone"] == DEFAULT_BACKBONE and c["method"] != "program_transfer"]
    by_method: dict[str, list[dict]] = defaultdict(list)
    for c in main:
        by_method[c["method"]].append(c)
    order = list(dict.fromkeys([*(methods or []), *[m for m in MAIN if m in by_method], *sorted(by_method)]))
    families = sorted({f for c in main for f in c["ood"]}, key=lambda f: FAMILIES.index(f)) or list(FAMILIES)
    ood_rows, ood_json = [], {}
    base_cells = {c["seed"]: c for c in main}
    if base_cells:
        row = {f: mean_se([c["ood_before"][f] for c in base_cells.values()]) for f in families}
        row["mean"] = mean_se([c["mean_ood_before"] for c in base_cells.values()])
        row["in_dist"] = mean_se([c.get("in_dist_before") for c in base_cells.values()])
        row["gain"] = (None, None, 0)
        ood_json["base (before rounds)"] = row
    for m in order:
        cs = by_method.get(m, [])
        row = {f: mean_se([c["ood"].get(f) for c in cs]) for f in families}
        row["mean"] = mean_se([c["mean_ood"] for c in cs])
        row["in_dist"] = mean_se([c["in_dist"] for c in cs])
        row["gain"] = mean_se([c["mean_ood"] - c["mean_ood_before"] for c in cs])
        ood_json[m] = row
    for m, row in ood_json.items():
        gain = "–" if row["gain"][0] is None else _fmt(*row["gain"][:2]).replace("pending", "–")
        ood_rows.append([m, *[_fmt(*row[f][:2]) for f in families], _fmt(*row["mean"][:2]), gain,
                         _fmt(*row["in_dist"][:2]), row["mean"][2]])
    ood_md = _md(["method", *families, "mean OOD", "Δ vs own base (pts)", "in-dist", "seeds"], ood_rows)

    paired_json, paired_md = paired_between(by_method, order)
    suites_json, suites_md = suite_table(by_method, order)
    external_json, external_md = external_table(by_method, order)

    metric_keys = ("verification_pass_rate", "coverage_entropy_bits", "targeting_precision", "critic_consistency",
                   "targeted_success", "control_success", "refutation_rate",
                   "accepted", "diagnoses", "shaped_rollouts", "sim_hours_per_1000_accepted",
                   "tokens_per_1000_accepted", "cell_wall_seconds")
    metrics_json = {m: {k: mean_se([c["metrics"].get(k) for c in by_method.get(m, [])]) for k in metric_keys}
                    for m in order}
    metric_rows = [[m, *[("–" if v[0] is None else f"{v[0]:.3g}") for v in metrics_json[m].values()]] for m in order]
    metrics_md = _md(["method", *metric_keys], metric_rows)

    t2p_json, t2p_rows = {}, []
    # the rows of the Text2potential methods this experiment planned or ran (all three when no plan is given)
    for m in [m for m in ("sparse", "potential_from_task", "coda") if methods is None or m in methods or by_method.get(m)]:
        cs = by_method.get(m, [])
        reached = [updates_to_threshold(c, threshold_gain)[1] for c in cs]
        hit = [u for u in reached if u is not None]
        t2p_json[m] = {"seeds": len(cs), "reached": len(hit), "updates_mean": mean_se(hit)[0],
                       "final_mean_ood": mean_se([c["mean_ood"] for c in cs])[:2],
                       "shaped_rollouts": mean_se([c["metrics"].get("shaped_rollouts") for c in cs])[0],
                       "max_updates": max((c["curve"][-1]["policy_updates"] for c in cs), default=None)}
    for m, v in t2p_json.items():
        if not v["seeds"]:
            t2p_rows.append([m, "pending", "pending", "pending", "pending"])
            continue
        upd = "not reached" if v["updates_mean"] is None else f"{v['updates_mean']:.0f}"
        t2p_rows.append([m, f"{v['reached']}/{v['seeds']}", f"{upd} (of {v['max_updates']})",
                         _fmt(*v["final_mean_ood"]), f"{v['shaped_rollouts']:.0f}"])
    sp, co = (t2p_json.get(m, {}).get("updates_mean") for m in ("sparse", "coda"))
    t2p_json["fewer_updates_with_potential"] = (1 - co / sp) if sp and co is not None else None
    t2p_md = _md(["method", "seeds reaching base + %.0f pts" % (100 * threshold_gain), "policy updates to reach",
                  "final mean OOD", "shaped rollouts per run"], t2p_rows)
    shaped = [c for m in ("sparse", "potential_from_task", "coda") for c in by_method.get(m, [])]
    if shaped and all((c.get("preset") or {}).get("round_update") == "bc" for c in shaped):
        t2p_json["measured"] = False
        t2p_md += ("\n\nNot a Text2potential measurement: with the `bc` round update the compiled potentials shape "
                   "nothing. Cells run before the loop stopped replaying under `bc` differ only in that, with "
                   "potentials, earlier rounds' rollouts in scenes that have one were trained on again (more BC "
                   "successes): they measure that replay, not shaping; later cells train CoDA and sparse alike (the "
                   "threshold is read from the interim evaluations).")

    bb = {m: [c for c in cells if c["backbone"] == TRANSFER_BACKBONE and c["method"] == m]
          for m in ("sft", "coda", "memory_transfer")}
    bb_json, bb_rows = {}, []
    labels = {"sft": "deepsets SFT", "coda": "deepsets CoDA (own generation)",
              "memory_transfer": "deepsets on transformer CoDA memory (no generation)"}
    for m, cs in bb.items():
        row = {f: mean_se([c["ood"].get(f) for c in cs]) for f in families}
        row["mean"] = mean_se([c["mean_ood"] for c in cs])
        row["generated"] = mean_se([c["metrics"].get("scenes") if m != "memory_transfer" else 0 for c in cs])
        bb_json[labels[m]] = row
        bb_rows.append([labels[m], *[_fmt(*row[f][:2]) for f in families], _fmt(*row["mean"][:2]), row["mean"][2]])
    bb_md = _md(["backbone / data", *families, "mean OOD", "seeds"], bb_rows)

    pt = [c for c in cells if c["method"] == "program_transfer"]
    pt_json, pt_rows = {}, []
    for f in families:
        row = {}
        for cond in ("within", "cross", "scratch"):
            lps = [c["conditions"].get(f"{f}/{cond}", {}).get("lp") for c in pt]
            envs = [c["conditions"].get(f"{f}/{cond}", {}).get("envs", 0) for c in pt]
            progs = [c["conditions"].get(f"{f}/{cond}", {}).get("programs", 0) for c in pt]
            row[cond] = {"lp": mean_se(lps), "envs": sum(envs), "programs": max(progs, default=0)}
        w, x = row["within"]["lp"][0], row["cross"]["lp"][0]
        row["cross_over_within"] = (x / w) if (w and x is not None and abs(w) > 1e-9) else None
        pt_json[f] = row
        pt_rows.append([f, *[("pending" if not pt else "n/a (no program)" if row[c]["lp"][0] is None else
                              f"{_fmt(*row[c]['lp'][:2])} ({row[c]['envs']} envs, {row[c]['programs']} progs)")
                             for c in ("within", "cross", "scratch")],
                        "–" if row["cross_over_within"] is None else f"{row['cross_over_within']:.2f}"])
    pt_md = _md(["target family", "LP within-family programs", "LP cross-family programs", "LP scratch (uniform)",
                 "cross / within"], pt_rows)
    return {"ood": ood_json, "ood_md": ood_md, "suites": suites_json, "suites_md": suites_md, "paired": paired_json, "paired_md": paired_md, "metrics": metrics_json, "metrics_md": metrics_md,
            "text2potential": t2p_json, "text2potential_md": t2p_md, "backbone_transfer": bb_json,
            "backbone_transfer_md": bb_md, "program_transfer": pt_json, "program_transfer_md": pt_md,
            "families": families, "methods": order, "cells": sorted(c["cell"] for c in cells),
            "threshold_gain": threshold_gain, "external": external_json, "external_md": external_md}


FLOOR, CEILING = 0.05, 0.90
"""a (family, suite) where every method is below FLOOR or above CEILING tells the methods apart by nothing"""


def suite_table(by_method: dict[str, list[dict]], order: list[str]) -> tuple[dict, str]:
    """Success per (family, suite) × method after the rounds (mean over seeds; suite "seed" = the base's seed
    distribution where evaluated), with the floor and ceiling cells (every method < 5% or > 90%) marked."""
    present = [m for m in order if by_method.get(m)]
    cells: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for m in present:
        rates = defaultdict(list)
        for c in by_method[m]:
            for e in c.get("eval_after", []):
                rates[(e["family"], e["suite"])].append(e["success_rate"])
        for key, xs in rates.items():
            cells[key][m] = sum(xs) / len(xs)
    if not cells:
        return {}, "(no evaluations)"
    fams = [f for f in FAMILIES if any(k[0] == f for k in cells)]
    suites = [s for s in (*SUITES, "seed") if any(k[1] == s for k in cells)]
    out, rows = {}, []
    for f in fams:
        for su in suites:
            vals = cells.get((f, su))
            if not vals:
                continue
            flag = ("floor" if all(v < FLOOR for v in vals.values()) else
                    "ceiling" if all(v > CEILING for v in vals.values()) else "")
            out[f"{f}/{su}"] = {"success": vals, "flag": flag or None}
            rows.append([f, su, *[("–" if m not in vals else f"{100 * vals[m]:.1f}") for m in present], flag or ""])
    return out, _md(["family", "suite", *present, "floor / ceiling"], rows)


def paired_between(by_method: dict[str, list[dict]], order: list[str]) -> tuple[dict, str]:
    """Mean OOD success of CoDA (the last method of the main table present, else the last in `order`) minus each
    other method, paired scene by scene within a seed (the cells of a seed evaluate the same scenes): per seed the
    paired difference ± its s.e., and pooled over seeds (mean of the seeds' differences, s.e. from theirs). Cells
    of a seed that started from different base policies (`same_base`) are not paired."""
    present = [m for m in order if by_method.get(m)]
    if len(present) < 2:
        return {}, "(fewer than two methods)"
    ref = next((m for m in reversed(MAIN) if m in present), present[-1])
    seeds = sorted({c["seed"] for cs in by_method.values() for c in cs})
    out, rows = {}, []
    for m in (x for x in present if x != ref):
        per_seed = {}
        for seed in seeds:
            a = next((c for c in by_method[ref] if c["seed"] == seed), None)
            b = next((c for c in by_method[m] if c["seed"] == seed), None)
            d = (paired_ood(b.get("eval_after", []), a.get("eval_after", [])) if a and b and same_base(a, b)
                 else None)  # cells from different base policies are not paired
            if d:
                per_seed[seed] = d
        if not per_seed:
            continue
        k = len(per_seed)
        points = [d["points"] for d in per_seed.values()]
        pooled = {"points": sum(points) / k, "se": sum(d["se"] ** 2 for d in per_seed.values()) ** 0.5 / k, "seeds": k,
                  # the spread of the seeds' differences: it also holds what the episodes' s.e. leaves out (another
                  # base per seed, and two runs of one cell landing apart on different machines)
                  "se_between_seeds": mean_se(points)[1] if k > 1 else None}
        out[f"{ref} - {m}"] = {"per_seed": per_seed, "pooled": pooled}
        between = pooled["se_between_seeds"]
        rows.append([f"{ref} − {m}", *[(f"{per_seed[s]['points']:+.1f} ± {per_seed[s]['se']:.1f}" if s in per_seed
                                        else "–") for s in seeds],
                     f"**{pooled['points']:+.1f} ± {pooled['se']:.1f}**", "–" if between is None else f"± {between:.1f}"])
    return out, (_md(["difference", *[f"seed {s}" for s in seeds], "pooled (± episodes' s.e.)", "± s.e. over seeds"],
                     rows) if rows else "(no paired cells)")


def external_table(by_method: dict[str, list[dict]], order: list[str]) -> tuple[dict, str]:
    """External target tasks (cells run with `Preset.external`): success per task after the rounds (mean ± s.e.
    over seeds), the mean, the change from the cell's own base, and CoDA − method over the same episodes (pooled
    over seeds as `paired_between`)."""
    from agent.experiment.metrics import paired_outcomes

    present = [m for m in order if any("external" in c for c in by_method.get(m, []))]
    if not present:
        return {}, "(no external targets)"
    tasks = list(dict.fromkeys(t for m in present for c in by_method[m] for t in c.get("external", {})))
    ref = next((m for m in reversed(MAIN) if m in present), present[-1])
    out, rows = {}, []
    for m in present:
        cs = [c for c in by_method[m] if "external" in c]
        row = {t: mean_se([c["external"].get(t) for c in cs]) for t in tasks}
        row["mean"] = mean_se([c["external_mean"] for c in cs])
        row["gain"] = mean_se([c["external_mean"] - c["external_mean_before"] for c in cs])
        diffs = []
        for c in cs:
            a = next((x for x in by_method[ref] if x["seed"] == c["seed"] and "external" in x), None)
            d = paired_outcomes(a["external_outcomes"], c["external_outcomes"]) if a and m != ref else None
            if d:
                diffs.append(d)
        row["vs_ref"] = ({"points": sum(d["points"] for d in diffs) / len(diffs),
                          "se": sum(d["se"] ** 2 for d in diffs) ** 0.5 / len(diffs), "seeds": len(diffs)}
                         if diffs else None)
        out[m] = row
        vs = row["vs_ref"]
        rows.append([m, *[_fmt(*row[t][:2]) for t in tasks], _fmt(*row["mean"][:2]), _fmt(*row["gain"][:2]),
                     f"{vs['points']:+.1f} ± {vs['se']:.1f}" if vs else "–", row["mean"][2]])
    table = _md(["method", *tasks, "mean", "Δ vs own base (pts)", f"{ref} − method (pts, paired)", "seeds"], rows)
    phases_json, phases_md = external_phase_table(by_method, present, tasks)
    if phases_json:
        out["phases"] = phases_json
        table += "\n\nEpisodes by the furthest phase reached (summed over seeds; the benchmark's own state, " \
                 "`policy.external.phases`):\n\n" + phases_md
    return out, table


def external_phase_table(by_method: dict[str, list[dict]], present: list[str], tasks: list[str]) -> tuple[dict, str]:
    """Per task and method, the after-round episodes by their furthest phase (none → reach → … → success) summed
    over the seeds, with the bases (each seed's before, once) as the first row; ({}, "") where no cell recorded
    phases (cells from before they were kept)."""
    def add(total: dict, phases: dict) -> None:
        for k, v in phases.items():
            total[k] = total.get(k, 0) + v

    out: dict[str, dict] = {}
    bases: dict[str, dict] = {}
    seen: set[int] = set()
    for m in present:
        for c in by_method[m]:
            if c.get("external_phases_before") and c["seed"] not in seen:
                seen.add(c["seed"])
                for t, ph in c["external_phases_before"].items():
                    add(bases.setdefault(t, {}), ph)
            for t, ph in (c.get("external_phases") or {}).items():
                add(out.setdefault(m, {}).setdefault(t, {}), ph)
    if not out:
        return {}, ""
    out = {"base (before rounds)": bases, **out} if bases else out
    rows = [[name, *[", ".join(f"{k} {v}" for k, v in per.get(t, {}).items() if v) or "–" for t in tasks]]
            for name, per in out.items()]
    return out, _md(["method", *tasks], rows)


def pooled_cells(out: Path, sources: list[Path]) -> tuple[dict, list[dict]]:
    """The cells of several experiments (e.g. seed groups of one protocol run in different sessions) as one
    experiment written to `out`, which must not hold an experiment of its own: (config, cells). A cell name
    (method and seed) in two sources is refused: the seeds of pooled experiments must be apart."""
    if (out / "experiment.json").exists():
        raise ValueError(f"{out} holds an experiment of its own; pool into a new folder")
    config: dict = {"methods": [], "seeds": [], "pooled_from": [str(s) for s in sources], "planned": []}
    cells: dict[str, dict] = {}
    where: dict[str, Path] = {}
    for src in sources:
        if not (src / "experiment.json").exists():
            raise ValueError(f"{src} is not an experiment folder (no experiment.json)")
        c = json.loads((src / "experiment.json").read_text())
        config["methods"] = list(dict.fromkeys(config["methods"] + c.get("methods", [])))
        config["seeds"] = sorted(set(config["seeds"]) | set(c.get("seeds", [])))
        config["planned"] += plan_cells(c.get("methods", []), c.get("seeds", []), c.get("transfer", False),
                                        c.get("transfer_seeds", []))  # each source's own plan, not the product
        for cell in load_cells(src):
            if cell["cell"] in cells:
                raise ValueError(f"cell {cell['cell']} is in both {where[cell['cell']]} and {src}: pooled "
                                 "experiments must use different seeds")
            cells[cell["cell"]], where[cell["cell"]] = cell, src
    write_json(out / "pooled.json", config)
    return config, [cells[k] for k in sorted(cells)]


def write_tables(out: Path, threshold_gain: float = THRESHOLD_GAIN, sources: list[Path] | None = None) -> dict:
    """Rewrite DIR/results.md|json and the plots from the finished cells of `out` or, with `sources`, of those
    experiments pooled (`pooled_cells`)."""
    out = Path(out)
    if sources:
        config, cells = pooled_cells(out, [Path(s) for s in sources])
    else:
        config = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").exists() else {}
        cells = load_cells(out)
    t = build_tables(cells, threshold_gain, config.get("methods"), config.get("seeds"))
    planned = config.get("planned") or plan_cells(config.get("methods", []), config.get("seeds", []),
                                                  config.get("transfer", False), config.get("transfer_seeds", []))
    done = set(t["cells"])
    pending = [cell_name(c["method"], c["seed"], c["backbone"]) for c in planned
               if cell_name(c["method"], c["seed"], c["backbone"]) not in done]
    t["pending_cells"] = pending
    transfer_cells = [c for c in cells if c["backbone"] != DEFAULT_BACKBONE or c["method"] == "program_transfer"]
    write_json(out / "results.json", {k: v for k, v in t.items() if not k.endswith("_md")})
    md = [f"# Experiment {out.name}", "",
          *([f"Pooled from {', '.join(config['pooled_from'])}.", ""] if sources else []),
          f"{len(done)} cells finished, {len(pending)} pending" + (f": {', '.join(pending)}" if pending else "") + ".",
          "", "## OOD success per family × method (%, mean ± s.e. over seeds; 'base' = the shared SFT policies)", "",
          t["ood_md"], "", "## Success per family × suite (%, after the rounds, mean over seeds; 'seed' = the base's "
          "seed distribution)", "", t["suites_md"], "",
          "## Paired differences in mean OOD success (points, the same scenes per seed)", "",
          t["paired_md"], "", *(["## External target tasks (%, the benchmark's own success; never trained on)", "",
                                  t["external_md"], ""] if t.get("external") else []),
          "## Data-engine metrics (mean over seeds)", "", t["metrics_md"], "",
          *([f"## Text2potential ablation (threshold = each seed's base mean OOD + {100 * threshold_gain:.0f} points)",
             "", t["text2potential_md"], ""] if any(isinstance(v, dict) for v in t["text2potential"].values()) else []),
          *(["## Transfer: memory across backbones", "", t["backbone_transfer_md"], "",
             "## Transfer: generation programs across families (learning progress, points)", "",
             t["program_transfer_md"], ""] if config.get("transfer") or transfer_cells else [])]
    if cells:
        try:
            plot(t, out / "ood_by_method.png")
            plot_curves(cells, out / "curves.png")
            md += ["![OOD success by method](ood_by_method.png)", "",
                   "![Mean OOD success after each round (mean over seeds)](curves.png)", ""]
        except Exception as exc:  # noqa: BLE001 - tables stand without the plot
            say(f"plot not written: {exc}")
    (out / "results.md").write_text("\n".join(md))
    return t


def plot(t: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {m: v for m, v in t["ood"].items() if v["mean"][0] is not None}
    fams = t["families"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 2]})
    names = list(rows)
    a1.bar(range(len(names)), [100 * rows[m]["mean"][0] for m in names],
           yerr=[100 * (rows[m]["mean"][1] or 0) for m in names], capsize=3, color="tab:blue")
    a1.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
    a1.set_ylabel("mean OOD success %")
    a1.set_title("Mean over families (± s.e. over seeds)")
    width = 0.8 / max(len(names), 1)
    for i, m in enumerate(names):
        ys = [100 * (rows[m][f][0] or 0) for f in fams]
        es = [100 * (rows[m][f][1] or 0) for f in fams]
        a2.bar([j + i * width for j in range(len(fams))], ys, width, yerr=es, capsize=2, label=m)
    a2.set_xticks([j + 0.4 - width / 2 for j in range(len(fams))], fams)
    a2.set_title("OOD success per family")
    a2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(cells: list[dict], path: Path) -> None:
    """Mean OOD success after each round against cumulative policy updates, per method (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_method: dict[str, list[dict]] = defaultdict(list)
    for c in cells:
        if c.get("curve") and c["backbone"] == DEFAULT_BACKBONE and c["method"] != "sft":
            by_method[c["method"]].append(c)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for m, cs in by_method.items():
        n = min(len(c["curve"]) for c in cs)
        xs = [c["curve"][i]["round"] for c in cs[:1] for i in range(n)]
        ys = [100 * sum(c["curve"][i]["mean_ood"] for c in cs) / len(cs) for i in range(n)]
        ax.plot(xs, ys, marker="o", label=f"{m} ({len(cs)} seeds)")
    ax.set_xlabel("round (0 = shared base policy)")
    ax.set_ylabel("mean OOD success %")
    if by_method:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
