"""`coda experiment`: methods × seeds at the same accepted-environment budget, saved cell by cell, and the tables.

Layout of an experiment directory DIR:

    DIR/experiment.json          configuration (methods, seeds, preset, backbone, code commit)
    DIR/base/<backbone>-s<seed>/ shared base policy of a seed: checkpoints/base.pt (SFT on the seed demos, trained
                                 once and copied into every cell of that seed) and eval.json (its evaluation)
    DIR/runs/<cell>/             the cell's run directory (state.json, memory, checkpoints, rollouts, report)
    DIR/cells/<cell>.json        the cell's result, written atomically when the cell finishes
    DIR/progress.log             one line per cell started / finished
    DIR/results.md|json, DIR/ood_by_method.png   the tables and the plot (rewritten after every cell)

A cell is `<method>-s<seed>` (plus `@<backbone>` for another backbone). An interrupted experiment continues with
`--resume`: finished cells are skipped and an unfinished one resumes from its last completed step.

Transfer (when asked for):
- backbone: the deepsets backbone trained on the accepted scenes and training programs of the transformer CoDA
  cell of the same seed, with no generation (`memory_transfer`), against deepsets SFT and deepsets CoDA;
- generation programs across families: the validated generation programs of the CoDA cells (all seeds pooled)
  applied by role binding to scenes of each family: programs of the same family ("within"), of the other families
  ("cross"), and uniform variants without a program ("scratch"), with the same number of environments, rollouts
  and updates each; learning progress = success on those environments after minus before the training.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from agent.methods import MAIN, get_method
from agent.presets import Preset, get_preset
from sim.constants import FAMILIES, OOD_SUITES

DEFAULT_BACKBONE = "transformer"
TRANSFER_BACKBONE = "deepsets"
THRESHOLD_GAIN = 0.05
"""Text2potential ablation: a cell reaches the threshold when its mean OOD success is ≥ its base's + this"""

EXPERIMENT_OVERRIDES = {
    "tiny": {"rounds": 2},
    "quick": {"rounds": 3, "eval_per_suite": 8},
    "paper": {},
}
"""Budget of an experiment cell relative to the run preset. quick: 3 rounds (generation memory only matters from
the third round on) and 8 evaluation scenes per (family, suite) (128 OOD episodes per evaluation); the base SFT
(≈ 70% of a quick run's time) is trained once per seed and shared, so a cell costs ≈ 4-6 min on 2 cores."""


def experiment_preset(name: str, **overrides) -> Preset:
    return get_preset(name, **{**EXPERIMENT_OVERRIDES.get(name, {}), **overrides})


def say(msg: str) -> None:
    print(f"[experiment] {msg}", file=sys.stderr, flush=True)


def cell_name(method: str, seed: int, backbone: str = DEFAULT_BACKBONE) -> str:
    return f"{method}-s{seed}" + ("" if backbone == DEFAULT_BACKBONE else f"@{backbone}")


def write_json(path: Path, data) -> None:
    """Atomic write (a crash leaves the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def code_commit() -> str:
    if os.environ.get("CODA_COMMIT"):
        return os.environ["CODA_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parents[1])
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# --- shared base policy ------------------------------------------------------------------------------------------


def base_fields(preset: Preset) -> dict:
    return {"families": list(preset.families), "demos_per_family": preset.demos_per_family,
            "sft_updates": preset.sft_updates, "eval_per_suite": preset.eval_per_suite}


def ensure_base(out: Path, preset: Preset, seed: int, backbone: str = DEFAULT_BACKBONE) -> dict:
    """The base policy of a seed (SFT on the seed demonstrations) and its evaluation, trained once per experiment
    and reused by every cell of that seed. Returns {"checkpoint", "eval", "seconds"}."""
    from agent.loop import SUITES

    d = out / "base" / f"{backbone}-s{seed}"
    ckpt, ev, meta = d / "checkpoints" / "base.pt", d / "eval.json", d / "meta.json"
    want = {**base_fields(preset), "seed": seed, "backbone": backbone}
    if meta.exists() and json.loads(meta.read_text()).get("config") != want:
        raise ValueError(f"{d} holds a base policy for another configuration; use another --out")
    if ckpt.exists() and ev.exists():
        return {"checkpoint": str(ckpt), "eval": json.loads(ev.read_text()),
                "seconds": json.loads(meta.read_text()).get("seconds", 0.0)}
    from policy.config import PolicyConfig, TrainConfig
    from policy.service import TrainerService

    say(f"base policy {backbone} seed {seed}: SFT on {preset.demos_per_family} demos per family, "
        f"{preset.sft_updates} updates")
    t0 = time.perf_counter()
    service = TrainerService(d, policy_config=PolicyConfig(backbone=backbone), train_config=TrainConfig(seed=seed))
    if not ckpt.exists():
        service.sft(list(preset.families), preset.demos_per_family, preset.sft_updates,
                    progress=_every(200, lambda done, total, m: say(f"  sft {done}/{total}")))
    else:
        service.load("base")
    result = service.evaluate(list(preset.families), list(SUITES), preset.eval_per_suite)
    seconds = round(time.perf_counter() - t0, 1)
    write_json(meta, {"config": want, "seconds": seconds})
    write_json(ev, result)
    say(f"base {backbone} seed {seed}: mean OOD {100 * mean_ood(result):.1f}% ({seconds:.0f} s)")
    return {"checkpoint": str(ckpt), "eval": result, "seconds": seconds}


def _every(k: int, fn: Callable) -> Callable:
    def progress(done, total, metrics):
        if done % k == 0 or done == total:
            fn(done, total, metrics)
    return progress


# --- one cell ------------------------------------------------------------------------------------------------------


def run_cell(out: Path, method: str, seed: int, preset: Preset, base: dict, *, backbone: str = DEFAULT_BACKBONE,
             memory_from: Path | None = None, embedder: str | None = None, backend: str = "offline") -> dict:
    """Run one (method, seed) cell through the four MCP servers, from the shared base policy. Returns its result
    (also written to DIR/cells/<cell>.json)."""
    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.roles.factory import make_roles

    name = cell_name(method, seed, backbone)
    run_dir = out / "runs" / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    if not (run_dir / "checkpoints" / "base.pt").exists():
        shutil.copyfile(base["checkpoint"], run_dir / "checkpoints" / "base.pt")
    extra = {"memory": ["--embedder", embedder]} if embedder else {}
    with Hub(stdio_specs(run_dir, extra_args=extra)) as hub:
        loop = CoEvolution(hub, make_roles(backend), run_dir, preset, name, method=get_method(method), seed=seed,
                           base={"tag": "base", "eval": base["eval"]}, memory_from=memory_from, early_stop=False)
        state = loop.run()
    try:
        from agent.report import write_report

        write_report(state, run_dir)
    except Exception as exc:  # noqa: BLE001 - the report is a convenience; the cell result is what counts
        say(f"report of {name} not written: {exc}")
    result = summarize(state, method=method, seed=seed, backbone=backbone, base=base)
    write_json(out / "cells" / f"{name}.json", result)
    return result


# --- metrics of a finished run -------------------------------------------------------------------------------------


def mean_ood(evals: list[dict], family: str | None = None) -> float:
    xs = [e["success_rate"] for e in evals if e["suite"] in OOD_SUITES and (family is None or e["family"] == family)]
    return sum(xs) / len(xs) if xs else float("nan")


def _suite_mean(evals: list[dict], suite: str) -> float:
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


def summarize(state: dict, *, method: str, seed: int, backbone: str, base: dict | None = None) -> dict:
    from agent.report import run_metrics

    steps = state["steps"]
    rounds = sorted(int(k[1:].split(".")[0]) for k in steps if k.startswith("r") and k.endswith(".eval"))
    curve = [{"round": 0, "policy_updates": 0, "critic_updates": 0, "eval": steps["eval.before"]["result"]}]
    pu = cu = 0
    for r in rounds:
        t = steps.get(f"r{r}.train", {}).get("result", {})
        if "skipped" not in t:
            pu += t.get("policy_updates", state["preset"]["policy_updates"])
            cu += state["preset"]["critic_updates"]
        curve.append({"round": r + 1, "policy_updates": pu, "critic_updates": cu, "eval": steps[f"r{r}.eval"]["result"]})
    scenes = [s for k, v in steps.items() if k.endswith(".generate") for s in v["result"]]
    rollouts = [x for k, v in steps.items() if k.endswith(".rollouts") for x in v["result"]]
    diagnoses = [d for k, v in steps.items() if k.endswith(".diagnose") for d in v["result"]]
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
               "shaped_rollouts": sum(t.get("shaped_rollouts", 0) for t in trains),
               "reused_potentials": sum(t.get("reused_potentials", 0) for t in trains),
               "accepted_per_round": [sum(batches[f"r{r}"].values()) for r in rounds],
               "cell_wall_seconds": state.get("wall_seconds"),
               "base_seconds": (base or {}).get("seconds")}
    return {
        "cell": cell_name(method, seed, backbone), "method": method, "seed": seed, "backbone": backbone,
        "preset": state["preset"], "commit": code_commit(), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "ood": {f: mean_ood(after, f) for f in state["preset"]["families"]},
        "ood_before": {f: mean_ood(before, f) for f in state["preset"]["families"]},
        "in_dist": _suite_mean(after, "in"), "in_dist_before": _suite_mean(before, "in"),
        "mean_ood": mean_ood(after), "mean_ood_before": mean_ood(before),
        "curve": [{**c, "mean_ood": mean_ood(c["eval"]), "in_dist": _suite_mean(c["eval"], "in")} for c in curve],
        "batches": batches, "metrics": metrics, "eval_after": after,
    }


# --- transfer of generation programs across families ---------------------------------------------------------------


def load_programs(out: Path, seeds: list[int]) -> list[dict]:
    """Validated generation programs of the CoDA cells (from their memory exports), each with its mode's phase."""
    progs = []
    for s in seeds:
        exp = out / "runs" / cell_name("coda", s) / "exports" / "memory"
        if not (exp / "generation_programs.jsonl").exists():
            continue
        modes = {m["id"]: m for m in map(json.loads, (exp / "modes.jsonl").read_text().splitlines()) if m}
        for line in (exp / "generation_programs.jsonl").read_text().splitlines():
            g = json.loads(line)
            mode = modes.get(g["mode_id"], {})
            progs.append({**g, "phase": mode.get("phase"), "source_seed": s})
    return sorted(progs, key=lambda g: g["id"])


def run_program_transfer(out: Path, seed: int, preset: Preset, base: dict, programs: list[dict], *,
                         embedder: str | None = None) -> dict:
    """Learning progress on environments made by generation programs of the same family, of other families, and
    by uniform variants (scratch), per target family, each condition from the same base policy."""
    import numpy as np

    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.methods import uniform_variant
    from agent.roles.engine import OfflineEngine
    from agent.roles.factory import make_roles
    from memory_store.schema import GenerationProgram
    from sim.families import sample_spec

    name = f"program_transfer-s{seed}"
    run_dir = out / "runs" / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    if not (run_dir / "checkpoints" / "base.pt").exists():
        shutil.copyfile(base["checkpoint"], run_dir / "checkpoints" / "base.pt")
    engine = OfflineEngine()
    n_env, per_scene = preset.targeted_per_family, max(2, preset.rollouts_per_scene)
    extra = {"memory": ["--embedder", embedder]} if embedder else {}
    results: dict[str, dict] = {}
    partial = run_dir / "partial.json"
    if partial.exists():
        results = json.loads(partial.read_text())
    with Hub(stdio_specs(run_dir, extra_args=extra)) as hub:
        loop = CoEvolution(hub, make_roles("offline"), run_dir, preset, name, seed=seed,
                           base={"tag": "base", "eval": base["eval"]})
        for fi, family in enumerate(preset.families):
            conditions = {"within": [g for g in programs if g["family"] == family],
                          "cross": [g for g in programs if g["family"] != family], "scratch": None}
            for cond, pool in conditions.items():
                key = f"{family}/{cond}"
                if key in results:
                    continue
                if pool is not None and not pool:
                    results[key] = {"programs": 0, "envs": 0, "lp": None}
                    write_json(partial, results)
                    continue
                rng = np.random.default_rng([seed, fi, len(key)])
                made, i = [], 0
                while len(made) < n_env and i < 8 * n_env:
                    spec = sample_spec(family, 700_000 + 10_000 * seed + 100 * fi + i)
                    if pool is None:
                        v = uniform_variant(engine, spec, rng)
                        made += [v] if v is not None else []
                    else:
                        g = pool[i % len(pool)]
                        prog = GenerationProgram.model_validate({k: v for k, v in g.items()
                                                                 if k not in ("phase", "source_seed")})
                        made += engine.apply_generation_program(prog, spec, 1, seed=i, phase=g["phase"])[:1]
                    i += 1
                scenes = [loop._create(90 + fi, pr, None) for pr in made]
                ids = [s["scene_id"] for s in scenes if s["verified"]]
                if not ids:
                    results[key] = {"programs": len(pool or []), "envs": 0, "lp": None}
                    write_json(partial, results)
                    continue
                loop.call("trainer", "load_checkpoint", tag="base")
                tag = f"t{fi}{cond[:2]}"
                before = loop.job("collect_rollouts", scene_ids=ids, per_scene=per_scene, seed=seed, tag=tag + "b")
                loop.job("start_training", rollout_ids=[x["rollout_id"] for x in before],
                         demo_families=list(preset.families), demos_per_family=max(1, preset.demos_per_family // 2),
                         critic_updates=preset.critic_updates, policy_updates=preset.policy_updates, lora=preset.lora)
                after = loop.job("collect_rollouts", scene_ids=ids, per_scene=per_scene, seed=seed + 1, tag=tag + "a")
                b = sum(x["success"] for x in before) / len(before)
                a = sum(x["success"] for x in after) / len(after)
                results[key] = {"programs": len(pool or []), "envs": len(ids), "before": b, "after": a, "lp": a - b}
                say(f"  program transfer {key}: {len(ids)} envs, success {b:.2f} -> {a:.2f}")
                write_json(partial, results)
    result = {"cell": name, "method": "program_transfer", "seed": seed, "backbone": DEFAULT_BACKBONE,
              "commit": code_commit(), "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "conditions": results,
              "programs": [{k: g[k] for k in ("id", "family", "factor", "phase", "source_seed")} for g in programs]}
    write_json(out / "cells" / f"{name}.json", result)
    return result


# --- the experiment ------------------------------------------------------------------------------------------------


def plan_cells(methods: list[str], seeds: list[int], transfer: bool, transfer_seeds: list[int]) -> list[dict]:
    """Cells in run order: seed by seed over the methods (so early seeds give complete comparisons), then the
    transfer cells."""
    cells = [{"method": m, "seed": s, "backbone": DEFAULT_BACKBONE} for s in seeds for m in methods]
    if transfer:
        for s in transfer_seeds:
            cells += [{"method": "sft", "seed": s, "backbone": TRANSFER_BACKBONE},
                      {"method": "coda", "seed": s, "backbone": TRANSFER_BACKBONE},
                      {"method": "memory_transfer", "seed": s, "backbone": TRANSFER_BACKBONE,
                       "memory_from": cell_name("coda", s)}]
        cells += [{"method": "program_transfer", "seed": s, "backbone": DEFAULT_BACKBONE} for s in transfer_seeds]
    return cells


def run_experiment(out: Path, methods: list[str], seeds: list[int], preset: Preset, *, resume: bool = False,
                   transfer: bool = False, transfer_seeds: list[int] | None = None, embedder: str | None = None,
                   threshold_gain: float = THRESHOLD_GAIN, command: str = "",
                   cell_runner: Callable[..., dict] | None = None) -> dict:
    out = Path(out).resolve()
    for m in methods:
        get_method(m)
    transfer_seeds = list(seeds if transfer_seeds is None else transfer_seeds)
    if transfer and "coda" not in methods:
        raise ValueError("transfer reuses the CoDA cells: include coda in --methods")
    config_path = out / "experiment.json"
    config = {"methods": methods, "seeds": seeds, "preset": json.loads(json.dumps(preset.to_dict())),
              "transfer": transfer,
              "transfer_seeds": transfer_seeds, "threshold_gain": threshold_gain, "command": command,
              "commit": code_commit(), "embedder": embedder or "minilm"}
    if config_path.exists():
        if not resume:
            raise FileExistsError(f"{out} already holds an experiment; pass --resume to continue it or choose "
                                  "another --out")
        old = json.loads(config_path.read_text())
        if old["preset"] != config["preset"]:
            raise ValueError(f"{out} was run with another preset budget; cells would not be comparable")
        config["methods"] = list(dict.fromkeys(old["methods"] + methods))
        config["seeds"] = sorted(set(old["seeds"]) | set(seeds))
        if old.get("transfer"):  # a process of another seed group may run the transfer cells
            config["transfer"] = True
            config["transfer_seeds"] = sorted(set(old.get("transfer_seeds", [])) | set(transfer_seeds if transfer
                                                                                        else []))
        config["started"] = old.get("started")
        config["commits"] = sorted(set(old.get("commits", [old.get("commit")])) | {config["commit"]})
    config.setdefault("started", time.strftime("%Y-%m-%d %H:%M:%S"))
    write_json(config_path, config)
    runner = cell_runner or run_cell
    cells = plan_cells(methods, seeds, transfer, transfer_seeds)
    log = out / "progress.log"
    failures: list[str] = []
    for i, c in enumerate(cells, start=1):
        name = cell_name(c["method"], c["seed"], c["backbone"])
        if (out / "cells" / f"{name}.json").exists():
            continue
        _log(log, f"start {name} ({i}/{len(cells)})")
        say(f"cell {i}/{len(cells)}: {name}")
        t0 = time.perf_counter()
        try:
            base = ensure_base(out, preset, c["seed"], c["backbone"]) if cell_runner is None else {"seed": c["seed"]}
            if c["method"] == "program_transfer" and cell_runner is None:
                run_program_transfer(out, c["seed"], preset, base, load_programs(out, seeds), embedder=embedder)
            else:
                memory_from = out / "runs" / c["memory_from"] / "state.json" if c.get("memory_from") else None
                runner(out, c["method"], c["seed"], preset, base, backbone=c["backbone"], memory_from=memory_from,
                       embedder=embedder)
        except Exception as exc:  # noqa: BLE001 - one failed cell must not stop the others; --resume retries it
            _log(log, f"FAILED {name} after {time.perf_counter() - t0:.0f} s: {type(exc).__name__}: "
                      + " | ".join(str(exc).splitlines()))
            say(f"cell {name} failed: {exc}")
            failures.append(name)
            continue
        _log(log, f"done  {name} in {time.perf_counter() - t0:.0f} s")
        write_tables(out, threshold_gain)
    tables = write_tables(out, threshold_gain)
    tables["failed_cells"] = failures
    _log(log, "experiment finished" + (f" ({len(failures)} failed: {', '.join(failures)})" if failures else ""))
    return tables


def _log(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


# --- tables --------------------------------------------------------------------------------------------------------


def load_cells(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((Path(out) / "cells").glob("*.json"))]


def mean_se(xs: list[float]) -> tuple[float | None, float | None, int]:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None, 0
    m = sum(xs) / len(xs)
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else None
    return m, se, len(xs)


def _fmt(m: float | None, se: float | None = None, scale: float = 100.0, digits: int = 1) -> str:
    if m is None:
        return "pending"
    s = f"{scale * m:.{digits}f}"
    return s + (f" ± {scale * se:.{digits}f}" if se is not None else "")


def _md(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def updates_to_threshold(cell: dict, gain: float) -> tuple[float, int | None]:
    """(threshold, policy updates at the first evaluation whose mean OOD success reaches it; None if never)."""
    thr = cell["mean_ood_before"] + gain
    for c in cell["curve"]:
        if c["mean_ood"] >= thr - 1e-9 and c["round"] > 0:
            return thr, c["policy_updates"]
    return thr, None


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

    metric_keys = ("verification_pass_rate", "coverage_entropy_bits", "targeting_precision", "refutation_rate",
                   "accepted", "diagnoses", "shaped_rollouts", "sim_hours_per_1000_accepted",
                   "tokens_per_1000_accepted", "cell_wall_seconds")
    metrics_json = {m: {k: mean_se([c["metrics"].get(k) for c in by_method.get(m, [])]) for k in metric_keys}
                    for m in order}
    metric_rows = [[m, *[("–" if v[0] is None else f"{v[0]:.3g}") for v in metrics_json[m].values()]] for m in order]
    metrics_md = _md(["method", *metric_keys], metric_rows)

    t2p_json, t2p_rows = {}, []
    for m in ("sparse", "potential_from_task", "coda"):
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
    sp, co = t2p_json["sparse"]["updates_mean"], t2p_json["coda"]["updates_mean"]
    t2p_json["fewer_updates_with_potential"] = (1 - co / sp) if sp and co is not None else None
    t2p_md = _md(["method", "seeds reaching base + %.0f pts" % (100 * threshold_gain), "policy updates to reach",
                  "final mean OOD", "shaped rollouts per run"], t2p_rows)

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
    return {"ood": ood_json, "ood_md": ood_md, "metrics": metrics_json, "metrics_md": metrics_md,
            "text2potential": t2p_json, "text2potential_md": t2p_md, "backbone_transfer": bb_json,
            "backbone_transfer_md": bb_md, "program_transfer": pt_json, "program_transfer_md": pt_md,
            "families": families, "methods": order, "cells": sorted(c["cell"] for c in cells),
            "threshold_gain": threshold_gain}


def write_tables(out: Path, threshold_gain: float = THRESHOLD_GAIN) -> dict:
    out = Path(out)
    config = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").exists() else {}
    cells = load_cells(out)
    t = build_tables(cells, threshold_gain, config.get("methods"), config.get("seeds"))
    planned = plan_cells(config.get("methods", []), config.get("seeds", []), config.get("transfer", False),
                         config.get("transfer_seeds", []))
    done = set(t["cells"])
    pending = [cell_name(c["method"], c["seed"], c["backbone"]) for c in planned
               if cell_name(c["method"], c["seed"], c["backbone"]) not in done]
    t["pending_cells"] = pending
    write_json(out / "results.json", {k: v for k, v in t.items() if not k.endswith("_md")})
    md = [f"# Experiment {out.name}", "",
          f"{len(done)} cells finished, {len(pending)} pending" + (f": {', '.join(pending)}" if pending else "") + ".",
          "", "## OOD success per family × method (%, mean ± s.e. over seeds; 'base' = the shared SFT policies)", "",
          t["ood_md"], "", "## Data-engine metrics (mean over seeds)", "", t["metrics_md"], "",
          f"## Text2potential ablation (threshold = each seed's base mean OOD + {100 * threshold_gain:.0f} points)",
          "", t["text2potential_md"], "", "## Transfer: memory across backbones", "", t["backbone_transfer_md"], "",
          "## Transfer: generation programs across families (learning progress, points)", "",
          t["program_transfer_md"], ""]
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
